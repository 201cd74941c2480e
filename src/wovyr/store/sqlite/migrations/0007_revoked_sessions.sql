-- Web UI sessions signed out before they expire: a replayed cookie of one is refused, on
-- every server and after a restart. A row is useless once `until` (the session's expiry,
-- microseconds) has passed; purge_revoked_sessions deletes those.
CREATE TABLE revoked_sessions (
    session_id TEXT PRIMARY KEY,
    until      INTEGER NOT NULL
);
CREATE INDEX revoked_sessions_by_until ON revoked_sessions (until);
