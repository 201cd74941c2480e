-- Schedules (wovyr.store.schedules).

-- name: create_schedule
INSERT INTO schedules ({columns})
VALUES (
    :tenant, :id, :workflow, :definition_hash, :input::json, :spec::json, :overlap,
    :catchup_window, :paused, :note, :start_at, :end_at, :remaining_actions, :next_fire_at,
    :last_fire_at, :buffered::json, :running::json, :recent::json, :fired_count,
    :skipped_count, :missed_count, :created_at, :updated_at, :version)
ON CONFLICT (tenant, id) DO NOTHING;

-- name: schedules_lock@postgres
-- Serialises the schedule creates of one tenant that check its max-schedules quota (SQLite's
-- BEGIN IMMEDIATE serializes every writer already).
SELECT pg_advisory_xact_lock(hashtext('wovyr.schedules'), hashtext(:tenant));

-- name: schedules_count
SELECT count(*) AS n FROM schedules WHERE tenant = :tenant;

-- name: get_schedule
SELECT {columns}
FROM schedules
WHERE tenant = :tenant AND id = :id;

-- name: list_schedules
SELECT {columns}
FROM schedules
WHERE tenant = :tenant
ORDER BY id;

-- name: delete_schedule
DELETE FROM schedules WHERE tenant = :tenant AND id = :id;

-- name: due_schedules@postgres
-- Due by time, then those holding a buffered tick for a running execution to end.
(SELECT {columns}, 0 AS part
 FROM schedules
 WHERE next_fire_at IS NOT NULL AND next_fire_at <= :now
 ORDER BY next_fire_at
 LIMIT :limit)
UNION ALL
(SELECT {columns}, 1 AS part
 FROM schedules
 WHERE buffered::text <> '[]' AND NOT paused
   AND NOT (next_fire_at IS NOT NULL AND next_fire_at <= :now)
 LIMIT :limit)
ORDER BY part, next_fire_at;

-- name: due_schedules@sqlite
-- The same; each half's WHERE spelled as its partial index (schedules_due,
-- schedules_buffered): SQLite uses one only when the query names its condition term for term.
SELECT * FROM (
    SELECT {columns}, 0 AS part
    FROM schedules
    WHERE next_fire_at IS NOT NULL AND next_fire_at <= :now
    ORDER BY next_fire_at
    LIMIT :limit)
UNION ALL
SELECT * FROM (
    SELECT {columns}, 1 AS part
    FROM schedules
    WHERE buffered != '[]' AND paused = 0
      AND NOT (next_fire_at IS NOT NULL AND next_fire_at <= :now)
    LIMIT :limit)
ORDER BY part, next_fire_at;

-- name: update_schedule
UPDATE schedules
SET workflow = :workflow, definition_hash = :definition_hash, input = :input::json,
    spec = :spec::json, overlap = :overlap, catchup_window = :catchup_window,
    paused = :paused, note = :note, start_at = :start_at, end_at = :end_at,
    remaining_actions = :remaining_actions, next_fire_at = :next_fire_at,
    last_fire_at = :last_fire_at, buffered = :buffered::json,
    running = :running::json, recent = :recent::json, fired_count = :fired_count,
    skipped_count = :skipped_count, missed_count = :missed_count,
    created_at = :created_at, updated_at = :updated_at, version = :version
WHERE tenant = :tenant AND id = :id AND version = :expected_version;

-- name: columns
tenant, id, workflow, definition_hash, input, spec, overlap, catchup_window, paused, note,
start_at, end_at, remaining_actions, next_fire_at, last_fire_at, buffered, running, recent,
fired_count, skipped_count, missed_count, created_at, updated_at, version
