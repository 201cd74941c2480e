-- Sealed execution payloads (opt-in per tenant, `wovyr admin tenants set T --seal-payloads`):
-- 1 when the tenant's execution payloads are stored sealed with its data key.
ALTER TABLE tenants ADD COLUMN seal_payloads INTEGER NOT NULL DEFAULT 0;
