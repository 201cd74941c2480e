-- Schema version 10: web UI sessions signed out before they expire, so a replayed cookie
-- of one is refused on every server and after a restart. A row is useless once `until`
-- (the session's expiry) has passed; purge_revoked_sessions deletes those.
CREATE TABLE revoked_sessions (
    session_id text PRIMARY KEY,
    until      timestamptz NOT NULL
);
CREATE INDEX revoked_sessions_by_until ON revoked_sessions (until);
