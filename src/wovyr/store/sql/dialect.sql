-- Fragments every role's SQL may name as `{fragment}` (`wovyr.store.sql.role_queries`):
-- where the two dialects spell one thing apart.

-- name: row_lock@postgres
-- The rows read are locked until the transaction ends.
FOR UPDATE

-- name: row_lock@sqlite
-- (BEGIN IMMEDIATE serializes every writer already.)

-- name: skip_locked@postgres
-- The rows read are locked; a row another transaction holds is passed over, never waited for.
FOR UPDATE SKIP LOCKED

-- name: skip_locked@sqlite
-- (BEGIN IMMEDIATE serializes every writer already.)

-- name: lease_now@postgres
-- What a lease is measured against: with db_clock `:now` is NULL, the database's clock.
COALESCE(:now::timestamptz, now())

-- name: lease_now@sqlite
:now
