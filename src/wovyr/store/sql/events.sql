-- The events tables (wovyr.store.events): triggers, the events received, dedup keys,
-- webhook endpoints, the outbox of deliveries and their attempts.

-- name: trigger_get
SELECT tenant, name, topic, hook_id, document, updated_at, updated_by FROM triggers
WHERE tenant = :tenant AND name = :name;

-- name: trigger_put
INSERT INTO triggers (tenant, name, topic, hook_id, document, updated_at, updated_by)
VALUES (:tenant, :name, :topic, :hook_id, :document, :updated_at, :updated_by)
ON CONFLICT (tenant, name) DO UPDATE SET topic = excluded.topic, hook_id = excluded.hook_id,
    document = excluded.document, updated_at = excluded.updated_at,
    updated_by = excluded.updated_by;

-- name: trigger_hook_taken
SELECT 1 FROM triggers WHERE hook_id = :hook_id AND NOT (tenant = :tenant AND name = :name);

-- name: trigger_list
SELECT tenant, name, topic, hook_id, document, updated_at, updated_by FROM triggers
WHERE tenant = :tenant ORDER BY name;

-- name: trigger_list_topic
SELECT tenant, name, topic, hook_id, document, updated_at, updated_by FROM triggers
WHERE tenant = :tenant AND topic = :topic ORDER BY name;

-- name: trigger_by_hook
SELECT tenant, name, topic, hook_id, document, updated_at, updated_by FROM triggers
WHERE hook_id = :hook_id;

-- name: trigger_delete
DELETE FROM triggers WHERE tenant = :tenant AND name = :name;

-- name: trigger_event_insert
INSERT INTO trigger_events (tenant, id, received_at, source, topic, trigger_name, outcome,
                            reason, execution_id, dedup_key, size)
VALUES (:tenant, :id, :received_at, :source, :topic, :trigger, :outcome, :reason,
        :execution_id, :dedup_key, :size)
ON CONFLICT (tenant, id) DO NOTHING;

-- name: trigger_event_get
SELECT tenant, id, received_at, source, topic, trigger_name AS "trigger", outcome, reason,
       execution_id, dedup_key, size
FROM trigger_events WHERE tenant = :tenant AND id = :id;

-- name: trigger_event_page
SELECT tenant, id, received_at, source, topic, trigger_name AS "trigger", outcome, reason,
       execution_id, dedup_key, size
FROM trigger_events
WHERE tenant = :tenant AND (:trigger = '' OR trigger_name = :trigger)
  AND (received_at < :before_at OR (received_at = :before_at AND id < :before_id))
ORDER BY received_at DESC, id DESC LIMIT :limit;

-- name: trigger_starts
SELECT count(*) AS n FROM trigger_events
WHERE tenant = :tenant AND trigger_name = :trigger AND received_at >= :since
  AND outcome IN ('started', 'signalled');

-- name: dedup_claim
-- Take the key when it is free or its holder expired; the row that holds it is read after.
INSERT INTO trigger_dedup (tenant, trigger_name, key, execution_id, expires_at)
VALUES (:tenant, :trigger, :key, :execution_id, :expires_at)
ON CONFLICT (tenant, trigger_name, key) DO UPDATE SET execution_id = excluded.execution_id,
    expires_at = excluded.expires_at
WHERE trigger_dedup.expires_at <= :now;

-- name: dedup_get
SELECT execution_id FROM trigger_dedup
WHERE tenant = :tenant AND trigger_name = :trigger AND key = :key;

-- name: endpoint_put
INSERT INTO webhook_endpoints (tenant, name, url, events, filter, secrets, updated_at,
                               updated_by)
VALUES (:tenant, :name, :url, :events, :filter, :secrets, :updated_at, :updated_by)
ON CONFLICT (tenant, name) DO UPDATE SET url = excluded.url, events = excluded.events,
    filter = excluded.filter, secrets = excluded.secrets, updated_at = excluded.updated_at,
    updated_by = excluded.updated_by;

-- name: endpoint_get
SELECT tenant, name, url, events, filter, secrets, updated_at, updated_by
FROM webhook_endpoints WHERE tenant = :tenant AND name = :name;

-- name: endpoint_list
SELECT tenant, name, url, events, filter, secrets, updated_at, updated_by
FROM webhook_endpoints WHERE tenant = :tenant ORDER BY name;

-- name: endpoint_delete
DELETE FROM webhook_endpoints WHERE tenant = :tenant AND name = :name;

-- name: outbox_execution
SELECT workflow, version FROM executions WHERE tenant = :tenant AND id = :id;

-- name: outbox_insert
INSERT INTO webhook_deliveries (tenant, id, endpoint, event, execution_id, seq, payload,
                                status, attempts, next_at, last_error, created_at,
                                updated_at)
VALUES (:tenant, :id, :endpoint, :event, :execution_id, :seq, :payload, 'pending', 0,
        :at, '', :at, :at)
ON CONFLICT (tenant, id) DO NOTHING;

-- name: delivery_due@postgres
SELECT tenant, id FROM webhook_deliveries
WHERE status = 'pending' AND next_at <= :now
ORDER BY next_at LIMIT :limit FOR UPDATE SKIP LOCKED;

-- name: delivery_due@sqlite
SELECT tenant, id FROM webhook_deliveries
WHERE status = 'pending' AND next_at <= :now
ORDER BY next_at LIMIT :limit;

-- name: delivery_lease
UPDATE webhook_deliveries SET next_at = :until
WHERE tenant = :tenant AND id = :id AND status = 'pending';

-- name: delivery_get
SELECT tenant, id, endpoint, event, execution_id, seq, payload, status, attempts, next_at,
       last_error, created_at, updated_at
FROM webhook_deliveries WHERE tenant = :tenant AND id = :id;

-- name: delivery_page
SELECT tenant, id, endpoint, event, execution_id, seq, payload, status, attempts, next_at,
       last_error, created_at, updated_at
FROM webhook_deliveries
WHERE tenant = :tenant AND (:endpoint = '' OR endpoint = :endpoint)
  AND (:status = '' OR status = :status)
  AND (created_at < :before_at OR (created_at = :before_at AND id < :before_id))
ORDER BY created_at DESC, id DESC LIMIT :limit;

-- name: delivery_update
UPDATE webhook_deliveries SET status = :status, attempts = :attempt, next_at = :next_at,
    last_error = :last_error, updated_at = :at
WHERE tenant = :tenant AND id = :id;

-- name: attempt_insert
INSERT INTO webhook_attempts (tenant, delivery_id, attempt, at, status_code, error)
VALUES (:tenant, :delivery_id, :attempt, :at, :status_code, :error)
ON CONFLICT (tenant, delivery_id, attempt) DO NOTHING;

-- name: attempt_list
SELECT tenant, delivery_id, attempt, at, status_code, error FROM webhook_attempts
WHERE tenant = :tenant AND delivery_id = :delivery_id ORDER BY attempt;
