-- Schema version 12: execution ids are per tenant. An execution is named by (tenant, id), and
-- so are its events and timers: the same id in two tenants is two executions. Rows that
-- exist keep their ids and their tenant (events and timers take their execution's, else
-- `default`). Writers always give the tenant: the columns keep no default.
ALTER TABLE events ADD COLUMN tenant text NOT NULL DEFAULT 'default';
UPDATE events AS e SET tenant = x.tenant
FROM executions AS x
WHERE x.id = e.execution_id AND x.tenant <> 'default';
ALTER TABLE events ALTER COLUMN tenant DROP DEFAULT;
ALTER TABLE events DROP CONSTRAINT events_pkey;
ALTER TABLE events ADD PRIMARY KEY (tenant, execution_id, seq);

ALTER TABLE timers ADD COLUMN tenant text NOT NULL DEFAULT 'default';
UPDATE timers AS t SET tenant = x.tenant
FROM executions AS x
WHERE x.id = t.execution_id AND x.tenant <> 'default';
ALTER TABLE timers ALTER COLUMN tenant DROP DEFAULT;
ALTER TABLE timers DROP CONSTRAINT timers_pkey;
ALTER TABLE timers ADD PRIMARY KEY (tenant, execution_id, timer_id);

ALTER TABLE executions DROP CONSTRAINT executions_pkey;
ALTER TABLE executions ADD PRIMARY KEY (tenant, id);
DROP INDEX executions_by_parent;
CREATE INDEX executions_by_parent ON executions (tenant, parent_id) WHERE parent_id IS NOT NULL;
