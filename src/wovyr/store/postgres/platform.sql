-- The quota ledger of the PostgreSQL store (the rest of the platform tables is shared:
-- wovyr.store.sql.platform), loaded by wovyr.store.postgres.platform.

-- name: quota_usage
SELECT budget, used FROM quota_usage WHERE tenant = %(tenant)s AND day = %(day)s;

-- name: quota_debit
-- Add a debit to the tenant's ledger row of the day, unless the row would pass the limit
-- (NULL: no limit); one statement, so the row lock orders concurrent debits: no row back
-- means refused.
INSERT INTO quota_usage (tenant, budget, day, used)
VALUES (%(tenant)s, %(budget)s, %(day)s, %(amount)s)
ON CONFLICT (tenant, budget, day) DO UPDATE SET used = quota_usage.used + excluded.used
WHERE %(limit)s::double precision IS NULL
    OR (quota_usage.used + excluded.used <= %(limit)s::double precision
        AND quota_usage.used < %(limit)s::double precision)
RETURNING used;

-- name: running_lock
-- Serialises the starts of one tenant that check its concurrent-executions quota.
SELECT pg_advisory_xact_lock(hashtext('wovyr.running'), hashtext(%(tenant)s));

-- name: running_count
SELECT count(*) FROM executions WHERE tenant = %(tenant)s AND status = 'running';

