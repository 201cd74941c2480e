-- Schedules (cron / interval). Times are integer microseconds (UTC); JSON as text.
CREATE TABLE schedules (
    tenant            TEXT NOT NULL,
    id                TEXT NOT NULL,
    workflow          TEXT NOT NULL,
    definition_hash   TEXT,
    input             TEXT NOT NULL,
    spec              TEXT NOT NULL,
    overlap           TEXT NOT NULL,
    catchup_window    REAL NOT NULL,
    paused            INTEGER NOT NULL DEFAULT 0,
    note              TEXT,
    start_at          INTEGER,
    end_at            INTEGER,
    remaining_actions INTEGER,
    next_fire_at      INTEGER,
    last_fire_at      INTEGER,
    buffered          TEXT NOT NULL DEFAULT '[]',
    running           TEXT NOT NULL DEFAULT '[]',
    recent            TEXT NOT NULL DEFAULT '[]',
    fired_count       INTEGER NOT NULL DEFAULT 0,
    skipped_count     INTEGER NOT NULL DEFAULT 0,
    missed_count      INTEGER NOT NULL DEFAULT 0,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL,
    version           INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, id)
);
CREATE INDEX schedules_due ON schedules (next_fire_at) WHERE next_fire_at IS NOT NULL;
CREATE INDEX schedules_buffered ON schedules (id) WHERE buffered != '[]' AND paused = 0;
