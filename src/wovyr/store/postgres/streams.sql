-- name: stream_fence
-- The writer's fence, and the lock that numbers its chunks (appends to one execution are
-- serialized; a claim that moves the fence waits for the append, or the append sees it).
SELECT fence FROM executions WHERE tenant = %(tenant)s AND id = %(id)s FOR NO KEY UPDATE;

-- name: stream_last
SELECT coalesce(max(n), 0) FROM stream_chunks
WHERE tenant = %(tenant)s AND execution_id = %(id)s;

-- name: stream_insert
INSERT INTO stream_chunks (tenant, execution_id, n, activity, attempt, recovery, turn, kind,
                           text, at)
VALUES (%(tenant)s, %(id)s, %(n)s, %(activity)s, %(attempt)s, %(recovery)s, %(turn)s,
        %(kind)s, %(text)s, %(at)s);

-- name: stream_read
SELECT n, activity, attempt, turn, kind, text, at, recovery FROM stream_chunks
WHERE tenant = %(tenant)s AND execution_id = %(id)s AND n > %(after)s
ORDER BY n LIMIT %(limit)s;
