-- Reads of executions' histories and of the workflow names a tenant has stored
-- (Store.history, Store.workflow_names).

-- name: history@postgres
-- From the one partition of events that holds the execution's (its creation month's),
-- pruned when planned (events_history, migration 0038). No execution row: no events.
SELECT seq, type, at, data FROM events_history(:tenant, :id, :after_seq, :limit);

-- name: history@sqlite
-- LIMIT -1: no limit.
SELECT seq, type, at, data FROM events
WHERE tenant = :tenant AND execution_id = :id AND seq > :after_seq
ORDER BY seq LIMIT coalesce(:limit, -1);

-- name: workflow_names
-- The workflow names of a tenant's stored definitions containing a text (any case).
SELECT DISTINCT name FROM definitions
WHERE tenant = :tenant AND {position}(lower(name), :contains) > 0
ORDER BY name
LIMIT :limit;

-- name: position@postgres
strpos

-- name: position@sqlite
instr
