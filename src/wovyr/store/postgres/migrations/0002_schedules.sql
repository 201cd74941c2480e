-- Schema version 2: schedules (cron / interval), as in the embedded store. A row carries its
-- own `version`; every change is a compare-and-set on it.
CREATE TABLE schedules (
    tenant            text NOT NULL,
    id                text NOT NULL,
    workflow          text NOT NULL,
    definition_hash   text,
    input             json NOT NULL,
    spec              json NOT NULL,
    overlap           text NOT NULL,
    catchup_window    double precision NOT NULL,
    paused            boolean NOT NULL DEFAULT false,
    note              text,
    start_at          timestamptz,
    end_at            timestamptz,
    remaining_actions integer,
    next_fire_at      timestamptz,
    last_fire_at      timestamptz,
    buffered          json NOT NULL DEFAULT '[]',
    running           json NOT NULL DEFAULT '[]',
    recent            json NOT NULL DEFAULT '[]',
    fired_count       bigint NOT NULL DEFAULT 0,
    skipped_count     bigint NOT NULL DEFAULT 0,
    missed_count      bigint NOT NULL DEFAULT 0,
    created_at        timestamptz NOT NULL,
    updated_at        timestamptz NOT NULL,
    version           bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, id)
);
CREATE INDEX schedules_due ON schedules (next_fire_at) WHERE next_fire_at IS NOT NULL;
CREATE INDEX schedules_buffered ON schedules (id) WHERE buffered::text <> '[]' AND NOT paused;
