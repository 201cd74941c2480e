-- Schema version 24: priority. An execution's `priority` (0-9, fixed at its start) and its
-- `claim_rank`: the start time in microseconds since 1970 less `priority` times the aging
-- step (wovyr.store.records.claim_rank). Within a tenant the claim takes free rows before
-- expired leases, then the lowest rank: higher priority first, and a lower priority waits
-- at most the aging step per level of difference (it ranks before any later start).
ALTER TABLE executions ADD COLUMN priority smallint NOT NULL DEFAULT 0;
ALTER TABLE executions ADD COLUMN claim_rank bigint NOT NULL DEFAULT 0;
UPDATE executions SET claim_rank = (extract(epoch FROM created_at) * 1000000)::bigint
WHERE ready;
DROP INDEX IF EXISTS executions_ready;
CREATE INDEX executions_ready ON executions (lease_until NULLS FIRST, claim_rank) WHERE ready;
DROP INDEX IF EXISTS executions_ready_by_tenant;
CREATE INDEX executions_ready_by_tenant ON executions (tenant, lease_until NULLS FIRST, claim_rank)
    WHERE ready;
