-- The quota ledger (wovyr.store.quotas): a tenant's usage per budget and UTC day, debited in
-- the transaction of the write it guards. The day is an ISO date (SQLite keeps it as text).

-- name: quota_usage
SELECT budget, used FROM quota_usage WHERE tenant = :tenant AND day = :day::date;

-- name: quota_debit
-- Add a debit to the tenant's ledger row of the day, unless the row would pass the limit
-- (NULL: no limit); one statement, so the row lock orders concurrent debits: no row back
-- means refused.
INSERT INTO quota_usage (tenant, budget, day, used)
VALUES (:tenant, :budget, :day::date, :amount)
ON CONFLICT (tenant, budget, day) DO UPDATE SET used = quota_usage.used + excluded.used
WHERE :limit::float8 IS NULL
    OR (quota_usage.used + excluded.used <= :limit::float8
        AND quota_usage.used < :limit::float8)
RETURNING used;

-- name: running_lock@postgres
-- Serialises the starts of one tenant that check its concurrent-executions quota (SQLite's
-- BEGIN IMMEDIATE serializes every writer already).
SELECT pg_advisory_xact_lock(hashtext('wovyr.running'), hashtext(:tenant));

-- name: running_count
-- The tenant's running executions but the one just started.
SELECT count(*) AS n FROM executions WHERE tenant = :tenant AND status = 'running' AND id != :id;
