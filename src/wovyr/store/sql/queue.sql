-- The work queue (Store.claim and the leases it hands out). The claim's own SQL is each
-- store's (wovyr.store.sql.queue).

-- name: renew_leases
UPDATE executions SET lease_until = {lease_until}
WHERE lease_owner = :owner
RETURNING tenant, id, fence, seq;
