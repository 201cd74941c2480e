-- Quotas: a tenant's limits (JSON, NULL: none) beside its policy, and the ledger of what
-- each tenant used of each daily budget per UTC day, debited in the transaction of the work
-- it pays for (a start, an attempt's seconds), so a restart never resets a day's count.
ALTER TABLE tenants ADD COLUMN quotas TEXT;
CREATE TABLE quota_usage (
    tenant TEXT NOT NULL,
    budget TEXT NOT NULL,
    day    TEXT NOT NULL,
    used   REAL NOT NULL,
    PRIMARY KEY (tenant, budget, day)
);
