-- The audit chain's reads and its anchors (wovyr.store.audit). Appending stays with each
-- store (`append_audit_row`): SQLite's writers are serialized by BEGIN IMMEDIATE, while
-- PostgreSQL's appenders wait on the one row of audit_head.

-- name: audit_last
SELECT seq, at, tenant, actor, action, target, details, prev_hash, hash FROM audit_log
ORDER BY seq DESC LIMIT 1;

-- name: audit_list
-- `audit_records` adds its filters (a tenant, a time) to this and ends it with its page.
SELECT seq, at, tenant, actor, action, target, details, prev_hash, hash FROM audit_log
WHERE seq > :after_seq;

-- name: audit_anchor_insert
INSERT INTO audit_anchors (seq, hash, mac, at) VALUES (:seq, :hash, :mac, :at);

-- name: audit_anchor_list
SELECT seq, hash, mac, at FROM audit_anchors ORDER BY seq, at, id;
