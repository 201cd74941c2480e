-- Schema version 30: search. An execution's labels (set at start) are kept with it, for
-- showing, and one row per label in execution_labels, whose primary key is the index a
-- label filter walks newest first: written only for executions that have labels.
-- Ids are searched by prefix on the primary key (tenant, id); workflow names by
-- substring on the small definitions table, then on executions_by_workflow.
ALTER TABLE executions ADD COLUMN labels jsonb;
CREATE TABLE execution_labels (
    tenant       text NOT NULL,
    key          text NOT NULL,
    value        text NOT NULL,
    created_at   timestamptz NOT NULL,
    execution_id text NOT NULL,
    PRIMARY KEY (tenant, key, value, created_at, execution_id)
);
