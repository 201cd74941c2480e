-- Schema version 14: quotas. A tenant's limits (NULL: none) beside its policy, and the
-- ledger of what each tenant used of each daily budget per UTC day, debited in the
-- transaction of the work it pays for (a start, an attempt's seconds), so a restart never
-- resets a day's count.
ALTER TABLE tenants ADD COLUMN quotas jsonb;
CREATE TABLE quota_usage (
    tenant text NOT NULL,
    budget text NOT NULL,
    day    date NOT NULL,
    used   double precision NOT NULL,
    PRIMARY KEY (tenant, budget, day)
);
