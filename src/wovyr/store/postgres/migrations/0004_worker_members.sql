-- Schema version 4: worker membership. Workers that join (`Worker(membership=True)`) upsert
-- their row on every heartbeat; a row whose `last_seen` is older than the members' time to
-- live is dropped by the next heartbeat of anyone. The partitions of the work queue are then
-- assigned from the sorted list of live owners (wovyr.worker.partitions.assign_partitions),
-- so every worker computes the same assignment from the same list.
CREATE TABLE worker_members (
    owner      text PRIMARY KEY,
    joined_at  timestamptz NOT NULL,
    last_seen  timestamptz NOT NULL
);
CREATE INDEX worker_members_by_last_seen ON worker_members (last_seen);
