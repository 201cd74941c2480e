-- Schema version 9: the executions shown as `waiting` (status 'running' with a `waiting_on`
-- text: the engine writes one exactly while an execution waits and runs nothing itself), so
-- `status=waiting` pages walk their own index in (created_at, id) order. Rows written
-- before keep their `waiting_on` text until their next step recomputes it.
CREATE INDEX executions_waiting ON executions (tenant, created_at DESC, id DESC)
    WHERE status = 'running' AND waiting_on IS NOT NULL;
