-- Schema version 6: list/filter by workflow AND status (the executions page with both
-- filters) walks one index in (created_at, id) order, whatever the mix of statuses: with
-- only executions_by_workflow, a rare status of a busy workflow meant reading every row of
-- that workflow to fill a page.
CREATE INDEX executions_by_workflow_status
    ON executions (tenant, workflow, status, created_at DESC, id DESC);
