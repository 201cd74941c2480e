-- Schema version 2: every execution's stable shard (crc32(id) mod 1024), set at insert, so
-- workers can claim by partition. `wovyr_shard` is registered by the store in Python
-- (wovyr.store.shards.stable_shard) to back-fill the rows that already exist.
ALTER TABLE executions ADD COLUMN shard INTEGER NOT NULL DEFAULT 0;
UPDATE executions SET shard = wovyr_shard(id);
