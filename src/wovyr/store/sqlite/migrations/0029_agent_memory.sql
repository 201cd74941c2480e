-- Agent memory (`wovyr.store.agent_memory`): items by (tenant, namespace, key), each
-- namespace's version (bumped by every write in the write's transaction: the search
-- cache's tag; each item's `seq` is the version of its last write, and `deletes` counts
-- the writes that removed a row), and the write ids that make a re-run write a no-op.
-- Times: microseconds.
CREATE TABLE memory_items (
    tenant          TEXT NOT NULL,
    namespace       TEXT NOT NULL,
    key             TEXT NOT NULL,
    value           TEXT NOT NULL,          -- JSON
    text            TEXT,
    embedding       BLOB,                   -- float32 little-endian
    embedding_model TEXT,
    version         INTEGER NOT NULL,
    seq             INTEGER NOT NULL,       -- the namespace's version at this write
    updated_at      INTEGER NOT NULL,
    expires_at      INTEGER,
    PRIMARY KEY (tenant, namespace, key)
);

CREATE INDEX memory_items_seq ON memory_items (tenant, namespace, seq);

CREATE INDEX memory_items_expiry ON memory_items (tenant, namespace, expires_at)
    WHERE expires_at IS NOT NULL;

CREATE TABLE memory_namespaces (
    tenant    TEXT NOT NULL,
    namespace TEXT NOT NULL,
    version   INTEGER NOT NULL,
    deletes   INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, namespace)
) WITHOUT ROWID;

CREATE TABLE memory_writes (
    tenant    TEXT NOT NULL,
    write_id  TEXT NOT NULL,
    op        TEXT NOT NULL,
    key       TEXT NOT NULL,
    version   INTEGER NOT NULL,
    existed   INTEGER NOT NULL,
    at        INTEGER NOT NULL,
    PRIMARY KEY (tenant, write_id)
) WITHOUT ROWID;

CREATE INDEX memory_writes_at ON memory_writes (tenant, at);
