-- Schema version 26: reruns. A rerun names the execution it reruns; the reruns of one
-- execution are found through a partial index (only reruns have a row in it).
ALTER TABLE executions ADD COLUMN rerun_of TEXT;
CREATE INDEX executions_by_rerun_of ON executions (tenant, rerun_of, created_at DESC, id DESC)
    WHERE rerun_of IS NOT NULL;
