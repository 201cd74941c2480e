-- Schema version 11: tenants with settings an administrator set (`wovyr admin tenants
-- set`): today the side-effect policy (NULL: the tenant's default). A tenant with no row
-- has every default.
CREATE TABLE tenants (
    tenant     text PRIMARY KEY,
    policy     jsonb,
    updated_at timestamptz NOT NULL,
    updated_by text NOT NULL DEFAULT ''
);
