-- Schema version 33: retention. Finished executions (completed, failed, cancelled,
-- continued: no step changes them again, so `updated_at` is when they finished) are found
-- for purging through two partial indexes that hold only them, oldest first, tenant-wide or
-- per workflow (wovyr.store.retention.find_expired). A tenant's retention settings are JSON
-- beside its policy and quotas (NULL: keep everything).
CREATE INDEX executions_finished ON executions (tenant, updated_at, id)
    WHERE status IN ('completed', 'failed', 'cancelled', 'continued');
CREATE INDEX executions_finished_by_workflow ON executions (tenant, workflow, updated_at, id)
    WHERE status IN ('completed', 'failed', 'cancelled', 'continued');
ALTER TABLE tenants ADD COLUMN retention TEXT;
