-- Schema version 13: the fair claim's index. Ready executions by tenant, in claim order
-- within a tenant: the claim finds the tenants with ready work by skipping through it
-- (one probe per tenant) and locks at most `limit` rows of each.
CREATE INDEX executions_ready_by_tenant ON executions (tenant, lease_until NULLS FIRST)
    WHERE ready;
