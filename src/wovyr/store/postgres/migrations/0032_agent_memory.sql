-- Agent memory (`wovyr.store.agent_memory`): items by (tenant, namespace, key), each
-- namespace's version (bumped by every write in the write's transaction: the search
-- cache's tag; each item's `seq` is the version of its last write, and `deletes` counts
-- the writes that removed a row), and the write ids that make a re-run write a no-op.
-- Embeddings are float32 vectors in bytea, searched in the process
-- (`wovyr.store.vectors`), not by pgvector.
CREATE TABLE memory_items (
    tenant          text NOT NULL,
    namespace       text NOT NULL,
    key             text COLLATE "C" NOT NULL,  -- listed in code-point order, as elsewhere
    value           json NOT NULL,
    text            text,
    embedding       bytea,
    embedding_model text,
    version         bigint NOT NULL,
    seq             bigint NOT NULL,        -- the namespace's version at this write
    updated_at      timestamptz NOT NULL,
    expires_at      timestamptz,
    PRIMARY KEY (tenant, namespace, key)
);

CREATE INDEX memory_items_seq ON memory_items (tenant, namespace, seq);

CREATE INDEX memory_items_expiry ON memory_items (tenant, namespace, expires_at)
    WHERE expires_at IS NOT NULL;

CREATE TABLE memory_namespaces (
    tenant    text NOT NULL,
    namespace text NOT NULL,
    version   bigint NOT NULL,
    deletes   bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, namespace)
);

CREATE TABLE memory_writes (
    tenant    text NOT NULL,
    write_id  text NOT NULL,
    op        text NOT NULL,
    key       text NOT NULL,
    version   bigint NOT NULL,
    existed   boolean NOT NULL,
    at        timestamptz NOT NULL,
    PRIMARY KEY (tenant, write_id)
);

CREATE INDEX memory_writes_at ON memory_writes (tenant, at);
