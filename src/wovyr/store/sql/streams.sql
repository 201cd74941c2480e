-- The stream journal (wovyr.store.streams): a running step's chunks, numbered per execution.

-- name: stream_fence
-- The writer's fence. SQLite's BEGIN IMMEDIATE already serializes the appends.
SELECT fence FROM executions WHERE tenant = :tenant AND id = :id;

-- name: stream_fence@postgres
-- The writer's fence, and the lock that numbers its chunks (appends to one execution are
-- serialized; a claim that moves the fence waits for the append, or the append sees it).
SELECT fence FROM executions WHERE tenant = :tenant AND id = :id FOR NO KEY UPDATE;

-- name: stream_last
SELECT coalesce(max(n), 0) AS last FROM stream_chunks
WHERE tenant = :tenant AND execution_id = :id;

-- name: stream_insert
INSERT INTO stream_chunks (tenant, execution_id, n, activity, attempt, recovery, turn, kind,
                           text, at)
VALUES (:tenant, :id, :n, :activity, :attempt, :recovery, :turn, :kind, :text, :at);

-- name: stream_read
SELECT n, activity, attempt, turn, kind, text, at, recovery FROM stream_chunks
WHERE tenant = :tenant AND execution_id = :id AND n > :after
ORDER BY n LIMIT :limit;
