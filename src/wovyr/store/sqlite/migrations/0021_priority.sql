-- Schema version 21: priority. An execution's `priority` (0-9, fixed at its start) and its
-- `claim_rank`: the start time in microseconds less `priority` times the aging step
-- (wovyr.store.records.claim_rank). Within a tenant the claim takes free rows before
-- expired leases, then the lowest rank: higher priority first, and a lower priority waits
-- at most the aging step per level of difference (it ranks before any later start).
ALTER TABLE executions ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
ALTER TABLE executions ADD COLUMN claim_rank INTEGER NOT NULL DEFAULT 0;
UPDATE executions SET claim_rank = created_at WHERE ready = 1;
DROP INDEX IF EXISTS executions_ready;
CREATE INDEX executions_ready ON executions (lease_until, claim_rank) WHERE ready = 1;
DROP INDEX IF EXISTS executions_ready_by_tenant;
CREATE INDEX executions_ready_by_tenant ON executions (tenant, lease_until, claim_rank)
    WHERE ready = 1;
