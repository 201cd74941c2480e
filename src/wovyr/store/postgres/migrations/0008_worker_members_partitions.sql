-- Schema version 8: every worker on PostgreSQL reports how it chooses what to claim, not
-- only the members of the membership: `mode` is 'member' (partitions assigned from the
-- live members), 'fixed' (`--partitions P --of N`) or 'all' (no partition filter), with
-- its partition count and fixed partitions. Workers check the live rows on each heartbeat
-- and report partition counts that disagree or partitions nobody claims (work there would
-- wait forever). Membership assigns partitions among the 'member' rows only.
ALTER TABLE worker_members
    ADD COLUMN mode text NOT NULL DEFAULT 'member',
    ADD COLUMN partition_count integer,
    ADD COLUMN partitions integer[] NOT NULL DEFAULT '{}';
