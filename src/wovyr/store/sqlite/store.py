"""SQLite store: one file, WAL, `synchronous=FULL`, `BEGIN IMMEDIATE` for every write.

One write connection per process, guarded by a lock, so a batch of steps from many
executions commits in one transaction (one fsync). Reads use a connection per thread.
Several processes may share the file: SQLite serialises writers and `busy_timeout` waits.
Leases and fences make that safe for workers (see `claim` and `commit`).

`SQLiteStore()` without a path is the `memory://` store: a file in a folder of its own in
the process's private folder (`wovyr.files.process_folder`, which isolated shell steps do
not see), removed when the store is closed (or collected, or at exit), written with
`synchronous=OFF` since nothing in it outlives the process, and started from a copy of a
migrated empty database made once per process. It is a file, not an in-memory database,
because the store relies on WAL (a reader never waits for the writer): SQLite's in-memory
databases, shared-cache or `memdb`, lock readers out of a table being written.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import tempfile
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar, cast

from wovyr.errors import StoreError, StoreUnavailable
from wovyr.files import atomic_write, process_folder
from wovyr.store.audit import AuditEntry, AuditRecord
from wovyr.store.base import (
    Claim,
    CommitOutcome,
    ExecutionFilter,
    ExecutionRecord,
    NewExecution,
    Page,
    StepWrite,
    TimerRecord,
)
from wovyr.store.capabilities import SnapshotInfo
from wovyr.store.checkpoints import DELTA_FROM, Ledger, merged
from wovyr.store.codec import dumps, from_micros, loads, to_micros
from wovyr.store.events import first_step_of, outbox_events
from wovyr.store.flow import HOLD_TIMER_PREFIX, GatedOutcome, plain_outcomes
from wovyr.store.hooks import Observers, StoreObserver
from wovyr.store.records import FairShare
from wovyr.store.rows import (
    SQLITE,
    claim_record,
    created_record,
    execution_record,
    from_row,
)
from wovyr.store.shards import shards_for, stable_shard
from wovyr.store.sql import Tx
from wovyr.store.sql.agent_memory import SQLAgentMemory
from wovyr.store.sql.artifacts import SQLArtifacts
from wovyr.store.sql.audit import SQLAudit
from wovyr.store.sql.bulk import SQLBulk
from wovyr.store.sql.events import SQLEvents, write_outbox
from wovyr.store.sql.executions import SQLExecutions
from wovyr.store.sql.flow import SQLFlow
from wovyr.store.sql.platform import SQLPlatform
from wovyr.store.sql.queue import ClaimPlan, SQLQueue
from wovyr.store.sql.quotas import SQLQuotas
from wovyr.store.sql.registry import SQLRegistry
from wovyr.store.sql.retention import SQLRetention
from wovyr.store.sql.schedules import SQLSchedules
from wovyr.store.sql.secrets import SQLSecrets
from wovyr.store.sql.streams import SQLStreams
from wovyr.store.sqlite.audit import append_audit_row
from wovyr.store.sqlite.flow import (
    SQLiteFlow,
    SQLiteRateLimits,
    read_gates,
    release_activity_slots,
    release_slot,
    take_slot,
    woken_holds,
    write_gates,
)
from wovyr.store.sqlite.retention import SQLiteRetention
from wovyr.store.sqlite.secrets import SQLiteScrub
from wovyr.store.sqlite.snapshot import write_snapshot

__all__ = ["SQLiteStore"]

_T = TypeVar("_T")

# The executions row's checkpoint column when the checkpoint lies in checkpoint_parts.
_IN_PARTS = ""
_INSERT_PART = "INSERT INTO checkpoint_parts (tenant, execution_id, seq, body) VALUES (?, ?, ?, ?)"


def _write_base(
    conn: sqlite3.Connection, tenant: str, execution_id: str, seq: int, whole: str
) -> None:
    """`whole` as the execution's base in checkpoint_parts, its old parts gone (always: the
    base must be the lowest seq, whatever this store remembers)."""
    _clear_parts(conn, tenant, execution_id)
    conn.execute(_INSERT_PART, (tenant, execution_id, seq, whole))


def _clear_parts(conn: sqlite3.Connection, tenant: str, execution_id: str) -> None:
    conn.execute(
        "DELETE FROM checkpoint_parts WHERE tenant = ? AND execution_id = ?", (tenant, execution_id)
    )


def _stored_checkpoint(
    conn: sqlite3.Connection, tenant: str, execution_id: str, column: str
) -> dict[str, Any]:
    """The checkpoint of a row whose checkpoint column is `column`: the column itself, or
    (when it is '') the base and deltas in checkpoint_parts folded (read in the caller's
    transaction, so that both reads see one state)."""
    if column != _IN_PARTS:
        return cast(dict[str, Any], loads(column))
    parts = conn.execute(
        "SELECT body FROM checkpoint_parts WHERE tenant = ? AND execution_id = ? ORDER BY seq",
        (tenant, execution_id),
    ).fetchall()
    if not parts:
        raise StoreError(f"execution {execution_id}: its checkpoint is missing")
    return merged(loads(parts[0][0]), (loads(p[0]) for p in parts[1:]))


def _claimed_checkpoint(conn: sqlite3.Connection, row: sqlite3.Row) -> dict[str, Any] | None:
    """A claimed row's checkpoint when it lies in checkpoint_parts (else None: the column)."""
    if row["checkpoint"] != _IN_PARTS:
        return None
    return _stored_checkpoint(conn, row["tenant"], row["id"], _IN_PARTS)


_SUMMARY_COLUMNS = (
    "id, tenant, workflow, version, definition_hash, status, created_at, updated_at, seq, "
    "parent_id, waiting_on, input, output, error, ready, lease_owner, lease_until, fence, "
    "labels"
)


# The tenants with ready work: a skip through executions_ready_by_tenant, one probe per
# tenant however long its backlog.
_READY_TENANTS = """
WITH RECURSIVE tenants(tenant) AS (
    SELECT (SELECT min(tenant) FROM executions WHERE ready = 1)
    UNION ALL
    SELECT (SELECT min(e.tenant) FROM executions e WHERE e.ready = 1 AND e.tenant > t.tenant)
    FROM tenants t WHERE t.tenant IS NOT NULL
)"""


# The fair claim (see `_claim_fair`); `/*shards*/` is the partition filter.
_CLAIM_FAIR = (
    _READY_TENANTS
    + """, shares(tenant, held, weight) AS (
    SELECT t.tenant, coalesce(json_extract(s.value, '$[0]'), 0),
           coalesce(json_extract(s.value, '$[1]'), 1.0)
    FROM tenants t LEFT JOIN json_each(:shares) s ON s.key = t.tenant
    WHERE t.tenant IS NOT NULL AND EXISTS (
        SELECT 1 FROM executions e
        WHERE e.ready = 1 AND e.tenant = t.tenant
          AND (e.lease_until IS NULL OR e.lease_until < :now)/*shards*/)
), levels AS (
    SELECT tenant, held, weight,
           (:limit + sum(held) OVER ()) * 1.0 / sum(weight) OVER () * weight AS upto
    FROM shares
), turns AS (
    SELECT tenant, held, weight,
           max(0, min(:limit, coalesce(:cap - held, :limit),
               CAST(upto AS INTEGER) + (upto > CAST(upto AS INTEGER)) - held)) AS room
    FROM levels
), candidates AS (
    SELECT x.rowid AS rid, x.tenant, x.lease_until, x.claim_rank, s.weight, s.room,
           row_number() OVER (PARTITION BY x.tenant
                              ORDER BY x.lease_until, x.claim_rank, x.rowid) AS k,
           s.held
    FROM turns s JOIN executions x ON x.rowid IN (
        SELECT e.rowid FROM executions e
        WHERE e.ready = 1 AND e.tenant = s.tenant
          AND (e.lease_until IS NULL OR e.lease_until < :now)/*shards*/
        ORDER BY e.lease_until, e.claim_rank
        LIMIT (SELECT max(room) FROM turns))
)
UPDATE executions SET lease_owner = :owner, lease_until = :until, fence = fence + 1
WHERE rowid IN (
    SELECT rid FROM candidates WHERE k <= room
    ORDER BY (held + k) * 1.0 / weight, lease_until, claim_rank, tenant, rid LIMIT :limit)
RETURNING id, fence, seq, checkpoint, definition_hash, tenant
"""
)


# The tenants with claimable work (see `SQLiteStore.claimable_tenants`): skip through
# executions_ready_by_tenant, one probe per tenant, then one probe for a claimable row.
_CLAIMABLE_TENANTS = (
    _READY_TENANTS
    + """
SELECT t.tenant FROM tenants t
WHERE t.tenant IS NOT NULL AND EXISTS (
    SELECT 1 FROM executions e
    WHERE e.ready = 1 AND e.tenant = t.tenant
      AND (e.lease_until IS NULL OR e.lease_until < ?)/*shards*/)
"""
)

# One tenant's part of a claim by turns: its first `room` claimable executions.
_TURN = (
    "SELECT rowid FROM (SELECT rowid FROM executions"
    " WHERE ready = 1 AND tenant = :t{i} AND (lease_until IS NULL OR lease_until < :now)"
    "/*shards*/ ORDER BY lease_until, claim_rank LIMIT :r{i})"
)


# A tenant's part with a cap on its executions leased by every worker (`max_running`,
# :m{i}): at most the cap less its live leases, counted on executions_ready_by_tenant (a
# leased execution is ready) in the claim's own write transaction, so that another
# process's claim (SQLite has one writer at a time) sees these leases before it counts.
_CAPPED_TURN = (
    "SELECT rowid FROM (SELECT rowid FROM executions"
    " WHERE ready = 1 AND tenant = :t{i} AND (lease_until IS NULL OR lease_until < :now)"
    "/*shards*/ ORDER BY lease_until, claim_rank"
    " LIMIT max(0, min(:r{i}, :m{i} - (SELECT count(*) FROM executions"
    " WHERE ready = 1 AND tenant = :t{i} AND lease_until >= :now))))"
)


# The tenants with one turn each (a JSON list, :ones): one correlated probe per tenant for
# its first claimable row, cheaper than a part each when a claim serves many tenants once.
_ONES = (
    "SELECT (SELECT rowid FROM executions"
    " WHERE ready = 1 AND tenant = j.value AND (lease_until IS NULL OR lease_until < :now)"
    "/*shards*/ ORDER BY lease_until, claim_rank LIMIT 1) AS rowid FROM json_each(:ones) j"
)


@cache
def _claim_by_turns(parts: int, capped: int = 0, ones: bool = False) -> str:
    """The claim by `FairShare.turns` with `parts` tenants of their own (a power of two, or
    0, so that a few statement texts serve every claim and stay in the driver's statement
    cache), the first `capped` of them with a `max_running` (also a power of two, or 0),
    and with `ones`, the tenants with a single turn listed in :ones."""
    arms = [(_CAPPED_TURN if i < capped else _TURN).format(i=i) for i in range(parts)]
    union = " UNION ALL ".join([*arms, _ONES] if ones else arms)
    return (
        "UPDATE executions SET lease_owner = :owner, lease_until = :until, fence = fence + 1"
        f" WHERE rowid IN (SELECT rowid FROM ({union}) LIMIT :limit)"
        " RETURNING id, fence, seq, checkpoint, definition_hash, tenant"
    )


def _claim_plain(ask: ClaimPlan, until: int, now: int) -> tuple[str, list[Any]]:
    """The plain claim: the first claimable executions (of `ask.only`), in claim order."""
    only_sql = ""
    params: list[Any] = [ask.owner, until, now]
    if ask.only is not None:
        only = ask.only
        only_sql = f" AND tenant = ? AND id IN ({','.join('?' * len(only))})" if only else " AND 0"
        params += [ask.tenant, *only] if only else []
    if ask.shards is not None:
        shards = ask.shards
        only_sql += f" AND shard IN ({','.join('?' * len(shards))})" if shards else " AND 0"
        params += sorted(shards)
    sql = (
        "UPDATE executions SET lease_owner = ?, lease_until = ?, fence = fence + 1"
        " WHERE rowid IN (SELECT rowid FROM executions WHERE ready = 1"
        "   AND (lease_until IS NULL OR lease_until < ?)"
        + only_sql
        + " ORDER BY lease_until, claim_rank LIMIT ?)"
        " RETURNING id, fence, seq, checkpoint, definition_hash, tenant"
    )
    return sql, [*params, ask.limit]


def _claim_fair(
    ask: ClaimPlan, fair: FairShare, until: int, now: int
) -> tuple[str, dict[str, Any]]:
    """The fair claim (see `FairShare`), one statement: `tenants` skips through
    executions_ready_by_tenant (one probe per tenant with ready work, however long its
    backlog), `shares` keeps those with a claimable row (a probe each), `turns` gives
    each its room (`FairShare.rooms`, ceil(S * weight) - held, written without ceil(),
    which not every SQLite has), each tenant's first claimable rows are read from the
    same index, rank k scores (held + k) / weight, and the lowest `limit` are leased."""
    named = {*fair.held, *fair.weights}
    shares = {t: [fair.held.get(t, 0), fair.weights.get(t, 1.0)] for t in named}
    params = {"owner": ask.owner, "until": until, "now": now, "limit": ask.limit}
    params |= {"cap": fair.cap, "shares": dumps(shares)}
    return _CLAIM_FAIR.replace("/*shards*/", _shard_sql(ask.shards, "e.")), params


def _claim_turns(
    ask: ClaimPlan, fair: FairShare, until: int, now: int
) -> tuple[str, dict[str, Any]] | None:
    """The claim by turns (`FairShare.turns`): one statement, each named tenant's first
    claimable rows read from executions_ready_by_tenant (one probe per tenant; a
    tenant with a `max_running` one more, to count its live leases). None: nothing to
    claim."""
    turns, max_running, limit = fair.turns or {}, fair.max_running, ask.limit
    if limit <= 0:
        return None
    # A part each for the capped tenants (first) and those with several turns; the
    # others, one turn each, in one list.
    capped_parts: list[tuple[str, int]] = []
    parts_of: list[tuple[str, int]] = []
    ones: list[str] = []
    for tenant, turn in turns.items():
        room = min(turn, limit)
        if room <= 0:
            continue
        if tenant in max_running:
            capped_parts.append((tenant, room))
        elif room > 1:
            parts_of.append((tenant, room))
        else:
            ones.append(tenant)
    wanted = capped_parts + parts_of
    if not wanted and not ones:
        return None
    parts = 1 << (len(wanted) - 1).bit_length() if wanted else 0  # padded: empty turns
    count = len(capped_parts)
    capped = 1 << (count - 1).bit_length() if count else 0  # at most `parts`
    params: dict[str, Any] = {"owner": ask.owner, "until": until, "now": now, "limit": limit}
    for i in range(parts):
        tenant, room = wanted[i] if i < len(wanted) else ("", 0)
        params[f"t{i}"], params[f"r{i}"] = tenant, room
        if i < capped:
            params[f"m{i}"] = max_running.get(tenant, 0)
    if ones:
        params["ones"] = dumps(ones)
    sql = _claim_by_turns(parts, capped, bool(ones)).replace("/*shards*/", _shard_sql(ask.shards))
    return sql, params


def _shard_sql(shards: frozenset[int] | None, alias: str = "") -> str:
    """The partition filter of a claim's SQL ('' for every partition)."""
    if shards is None:
        return ""
    if not shards:
        return " AND 0"
    return f" AND {alias}shard IN ({','.join(str(int(s)) for s in sorted(shards))})"


def _owner_only(path: Path, *, migrated: bool = False) -> None:
    """Create the database file readable and writable by its owner only (SQLite gives its
    -wal and -shm the database file's mode), and take group and other access away from an
    existing one and its side files (stores made before this was so were world-readable).
    A file owned by another user is left as it is. `migrated`: a new file holds the
    migrated image (`_create`)."""
    if not (migrated and _create(path)):
        with contextlib.suppress(FileExistsError):
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    uid = os.getuid()
    for suffix in ("", "-wal", "-shm"):
        side = Path(f"{path}{suffix}")
        with contextlib.suppress(FileNotFoundError):
            info = side.stat()
            if info.st_uid == uid and info.st_mode & 0o077:
                side.chmod(info.st_mode & 0o600)


def _create(path: Path) -> bool:
    """Create the new database file `path` holding the migrated image, durably, unless a
    file is there (False then, and when this file system cannot link: the caller creates it
    empty). `atomic_write` links it into place: two processes creating the same store at
    once cannot overwrite each other's, and nobody opens a part-written file. A new file is
    migrated so in about a tenth of the time the migrations take."""
    if path.exists():
        return False
    try:
        return atomic_write(path, _migrated_image(), 0o600, exclusive=True)
    except OSError:  # no hard links here: created empty and migrated in place
        return False


@cache
def _migrations() -> tuple[tuple[int, str], ...]:
    """(version, script) of every migration, in order."""
    folder = resources.files("wovyr.store.sqlite") / "migrations"
    out = []
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            out.append((int(entry.name.split("_", 1)[0]), entry.read_text(encoding="utf-8")))
    return tuple(sorted(out))


def _apply_migrations(conn: sqlite3.Connection) -> int:
    """Apply the migrations `conn`'s database lacks (in the caller's write transaction);
    return the schema version."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations "
        "(version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP)"
    )
    done = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
    for version, sql in _migrations():
        if version in done:
            continue
        for statement in _split_sql(sql):
            conn.execute(statement)
        conn.execute("INSERT INTO schema_migrations (version) VALUES (?)", (version,))
    row = conn.execute("SELECT max(version) FROM schema_migrations").fetchone()
    return int(row[0] or 0)


@cache
def _migrated_image() -> bytes:
    """An empty database with every migration applied, serialized; made once per process.
    A `memory://` store and a new file start from a copy of it (a few milliseconds) instead
    of running the migrations themselves (tens of milliseconds: a test suite opens
    hundreds)."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        conn.create_function("wovyr_shard", 1, stable_shard, deterministic=True)
        conn.execute("BEGIN IMMEDIATE")
        _apply_migrations(conn)
        conn.execute("COMMIT")
        return conn.serialize()
    finally:
        conn.close()


class SQLiteStore(
    SQLQueue,
    SQLExecutions,
    SQLSchedules,
    SQLRegistry,
    SQLPlatform,
    SQLQuotas,
    SQLAudit,
    SQLSecrets,
    SQLiteScrub,
    SQLiteFlow,
    SQLiteRateLimits,
    SQLFlow,
    SQLStreams,
    SQLAgentMemory,
    SQLiteRetention,
    SQLRetention,
    SQLBulk,
    SQLEvents,
    SQLArtifacts,
):
    """The embedded store. `path` is a file path (created with its folder if missing); None
    is the `memory://` store (a temporary file, not durable: see the module's docstring)."""

    def __init__(self, path: str | Path | None = None, *, busy_timeout_ms: int = 10_000) -> None:
        self._durable = path is not None
        self._remove_folder: Callable[[], object] | None = None
        if path is None:  # memory://: its folder goes with the store, closed or not
            folder = tempfile.mkdtemp(prefix="memory-", dir=process_folder())
            self._remove_folder = weakref.finalize(self, shutil.rmtree, folder, True)
            path = Path(folder) / "wovyr.db"
        self.path = Path(path)
        self.url = f"sqlite:///{self.path}" if self._durable else "memory://"
        self._busy_ms = busy_timeout_ms
        self._write_lock = threading.Lock()
        self._turns_lock = threading.Lock()
        self._turns: list[_Turn] = []  # writes handed in, waiting for the next transaction
        # how many transactions of `_grouped` held 1, 2, ... 8 or more writes (benchmarks)
        self.group_sizes = [0] * 8
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []  # every thread's, to close them all
        self._closed = False
        self._observers = Observers()
        self.commits = 0  # durable write transactions issued by this object (for benchmarks)
        self._ledger = Ledger()  # what this object last wrote of each checkpoint
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            if self._durable:
                _owner_only(self.path, migrated=True)
            else:
                _owner_only(self.path)
                self.path.write_bytes(_migrated_image())
        except OSError as exc:
            raise StoreUnavailable(f"cannot create the store {self.path}: {exc}") from exc
        self._writer = self._connect()
        self.migrate()

    # --- connections ---------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                self.path,
                isolation_level=None,
                check_same_thread=False,
                timeout=self._busy_ms / 1000,
            )
            conn.row_factory = sqlite3.Row  # records are read by column name (store/rows.py)
            conn.execute(f"PRAGMA busy_timeout = {int(self._busy_ms)}")
            # synchronous first: the switch to WAL syncs unless it is OFF
            conn.execute(f"PRAGMA synchronous = {'FULL' if self._durable else 'OFF'}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.create_function("wovyr_shard", 1, stable_shard, deterministic=True)
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"cannot open the store {self.path}: {exc}") from exc
        return conn

    def _reader(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            self._local.conn = conn
            self._readers = [*self._readers, conn]
        return conn

    def _snapshot(self, body: Callable[[sqlite3.Connection], _T]) -> _T:
        """`body`'s reads in one read transaction (one state of the database)."""
        if self._closed:
            raise StoreError("the store is closed")
        conn = self._reader()
        try:
            conn.execute("BEGIN")
            try:
                return body(conn)
            finally:
                conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise _translate(exc) from exc

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """A `BEGIN IMMEDIATE` transaction on the write connection; driver errors translated."""
        if self._closed:
            raise StoreError("the store is closed")
        with self._write_lock, self._transaction() as conn:
            yield conn

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """`_write` without the lock (the caller holds it)."""
        conn = self._writer
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise _translate(exc) from exc
        try:
            changes = conn.total_changes
            yield conn
            conn.execute("COMMIT")
            if conn.total_changes != changes:  # a write that changed nothing costs no fsync
                self.commits += 1
        except BaseException as exc:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error):
                raise _translate(exc) from exc
            raise

    def _grouped(self, body: Callable[[sqlite3.Connection], _T]) -> _T:
        """`body` run in a write transaction shared with the bodies other threads hand in
        meanwhile (group commit): while one transaction commits, the writes that arrive
        queue up, and the next thread to take the write lock runs them all in one
        transaction, one commit (one fsync), each in a savepoint of its own: a body's error
        undoes only its own writes and is raised to its own caller; a failed commit fails
        them all. Answers once the transaction that holds the body's writes has committed.
        Under concurrent starts and signals (the server's threads) this is what keeps the
        write lock from becoming a queue of one transaction per request."""
        if self._closed:
            raise StoreError("the store is closed")
        turn = _Turn(body)
        with self._turns_lock:
            self._turns.append(turn)
        with self._write_lock:
            if not turn.done:
                with self._turns_lock:
                    turns, self._turns = self._turns, []
                self._take_turns(turns)
        if turn.error is not None:
            raise turn.error
        return cast(_T, turn.value)

    def _take_turns(self, turns: list[_Turn]) -> None:
        shared = len(turns) > 1
        try:
            with self._transaction() as conn:
                for turn in turns:
                    if not shared:
                        turn.value = turn.body(conn)
                        continue
                    conn.execute("SAVEPOINT turn")
                    try:
                        turn.value = turn.body(conn)
                    except BaseException as exc:
                        conn.execute("ROLLBACK TO turn")
                        turn.error = _translate(exc) if isinstance(exc, sqlite3.Error) else exc
                    conn.execute("RELEASE turn")
            self.group_sizes[min(len(turns), 8) - 1] += 1
        except BaseException as exc:
            for turn in turns:
                if turn.error is None:
                    turn.error = exc
        finally:
            for turn in turns:
                turn.done = True

    _dialect = SQLITE  # for the roles written once for both SQL stores (wovyr.store.sql)

    def _sql_write(self, body: Callable[[Tx], _T]) -> _T:
        with self._write() as conn:
            return body(_Tx(conn, self))

    def _sql_read(self, sql: str, params: Mapping[str, Any]) -> list[Any]:
        return self._read(sql, params)

    def _read(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> list[Any]:
        if self._closed:
            raise StoreError("the store is closed")
        try:
            return self._reader().execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise _translate(exc) from exc

    def migrate(self) -> int:
        """Apply pending numbered migrations; return the schema version. A file that has
        them all is only read: opening it never waits for another process's writer (a
        `workflows show` beside a busy worker) and takes no write lock."""
        if self._closed:
            raise StoreError("the store is closed")
        try:
            done = {row[0] for row in self._writer.execute("SELECT version FROM schema_migrations")}
        except sqlite3.OperationalError:  # a new file: no table yet
            done = set()
        except sqlite3.Error as exc:
            raise _translate(exc) from exc
        if done and done.issuperset(version for version, _ in _migrations()):
            return int(max(done))
        with self._write() as conn:  # checked again under the lock: another may have won
            return _apply_migrations(conn)

    def schema_version(self) -> int:
        """The highest migration applied."""
        rows = self._read("SELECT max(version) FROM schema_migrations")
        return int(rows[0][0] or 0)

    def latest_migration(self) -> int:
        """The highest migration this code ships."""
        return max((version for version, _ in _migrations()), default=0)

    def pending_migrations(self) -> list[int]:
        """The migrations this code ships that the file has not applied (none once opened:
        the embedded store migrates itself on open)."""
        done = {int(row[0]) for row in self._read("SELECT version FROM schema_migrations")}
        return [version for version, _ in _migrations() if version not in done]

    def add_observer(self, observer: StoreObserver) -> None:
        self._observers.add(observer)

    def snapshot(self, dest: Path) -> SnapshotInfo:
        """Write a consistent copy of the store to the new file `dest` while writers go on
        (`wovyr.store.sqlite.snapshot`)."""
        if self._closed:
            raise StoreError("the store is closed")
        source = self._connect()  # its own connection: the writer is never held
        try:
            write_snapshot(source, Path(dest))
        finally:
            source.close()
        return SnapshotInfo("sqlite")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with self._write_lock:
            self._writer.close()
        for conn in self._readers:
            with contextlib.suppress(sqlite3.Error):
                conn.close()
        if self._remove_folder is not None:
            self._remove_folder()

    # --- executions ----------------------------------------------------------------------

    def _insert_execution(self, conn: sqlite3.Connection, new: NewExecution) -> bool:
        step = new.first_step
        whole = dumps(step.checkpoint)
        cur = conn.execute(
            "INSERT OR IGNORE INTO executions (id, tenant, workflow, version, definition_hash,"
            " status, created_at, updated_at, parent_id, seq, ready, lease_owner, lease_until,"
            " fence, waiting_on, input, output, error, checkpoint, shard, rerun_of, labels,"
            " priority, claim_rank)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                new.id,
                new.tenant,
                new.workflow,
                new.version,
                new.definition_hash,
                step.status,
                to_micros(new.created_at),
                to_micros(step.updated_at),
                new.parent_id,
                len(step.events),
                int(step.ready),
                new.lease_owner,
                to_micros(new.lease_until) if new.lease_until else None,
                1 if new.lease_owner else 0,
                step.waiting_on,
                dumps(new.input),
                dumps(step.output),
                dumps(step.error),
                whole if len(whole) < DELTA_FROM else _IN_PARTS,
                stable_shard(new.id),
                new.rerun_of,
                dumps(dict(new.labels)) if new.labels else None,
                new.priority,
                new.claim_rank,
            ),
        )
        created = cur.rowcount == 1
        if created and len(whole) >= DELTA_FROM:
            _write_base(conn, new.tenant, new.id, len(step.events), whole)
        if created:
            self._ledger.created(
                new.tenant, new.id, len(step.events), len(whole), step.changes is not None
            )
        if created and new.labels:  # one index row per label; none for the rest
            at = to_micros(new.created_at)
            conn.executemany(
                "INSERT INTO execution_labels (tenant, key, value, created_at, execution_id)"
                " VALUES (?, ?, ?, ?, ?)",
                [(new.tenant, k, v, at, new.id) for k, v in new.labels.items()],
            )
        if created:
            if new.debits or new.max_running is not None:
                self._check_start(_Tx(conn, self), new)
            self._write_children(conn, new.tenant, new.id, 0, step)
            if new.slot is not None:
                take_slot(conn, new)
            append_audit_row(conn, new.audit)
            if outbox_events(step, 0):  # a run that ends in its first step
                write_outbox(_Tx(conn, self), SQLITE, first_step_of(new), 0)
        return created

    def create_execution(self, new: NewExecution) -> tuple[bool, ExecutionRecord]:
        created = self._grouped(lambda conn: self._insert_execution(conn, new))
        if created:
            self._observers.created(new)
            if new.slot is None:
                return True, created_record(new)
        record = self.load(new.id, new.tenant)
        assert record is not None
        return created, record

    def commit(self, steps: Sequence[StepWrite], atomic: bool = False) -> list[CommitOutcome]:
        """Write a batch of steps in one transaction, each checked on its own; with `atomic`,
        nothing is written unless every step applies."""
        return plain_outcomes(self._commit_steps(steps, atomic))

    def commit_gated(self, steps: Sequence[StepWrite]) -> list[GatedOutcome]:
        return self._commit_steps(steps, False)

    def _commit_steps(self, steps: Sequence[StepWrite], atomic: bool) -> list[GatedOutcome]:
        if not steps:
            return []
        results: list[GatedOutcome] = []
        asks = [step.gate for step in steps if step.gate is not None]

        def body(conn: sqlite3.Connection) -> None:
            book = read_gates(conn, asks) if asks else None
            for step in steps:
                if book is not None and step.gate is not None:
                    answer = book.decide(step.gate)
                    if not answer.granted:  # nothing of the step is written
                        results.append(answer)
                        if atomic:
                            raise _Rollback
                        continue
                results.append(self._apply_step(conn, step))
                if results[-1] is not CommitOutcome.OK:
                    if book is not None and step.gate is not None:
                        book.undo(step.gate)  # a step that does not apply takes nothing
                    if atomic:
                        raise _Rollback
            if book is not None:
                write_gates(conn, book)

        try:
            self._grouped(body)
        except _Rollback:
            results += [CommitOutcome.CONFLICT] * (len(steps) - len(results))
        self._observers.committed(steps, plain_outcomes(results))
        return results

    def _apply_step(self, conn: sqlite3.Connection, step: StepWrite) -> CommitOutcome:
        # An execution waiting for a concurrency slot stays not ready (and keeps its
        # waiting text) until the slot is handed to it.
        # The checkpoint: whole in the row while small, else in checkpoint_parts (a base
        # and the deltas written on it: `wovyr.store.checkpoints`), the row's column ''.
        plan = self._ledger.plan(step)
        seq = step.expected_seq + len(step.events)
        whole = plan.whole
        sql = (
            "UPDATE executions SET seq = ?, status = ?, updated_at = ?,"
            " ready = (? AND flow_wait IS NULL),"
            " waiting_on = CASE WHEN flow_wait IS NULL THEN ? ELSE waiting_on END,"
            " output = ?, error = ?"
        )
        params: list[Any] = [
            seq,
            step.status,
            to_micros(step.updated_at),
            int(step.ready),
            step.waiting_on,
            dumps(step.output),
            dumps(step.error),
        ]
        if whole is not None:
            sql += ", checkpoint = ?"
            params.append(whole if len(whole) < DELTA_FROM else _IN_PARTS)
        if step.release_lease:
            sql += ", lease_owner = NULL, lease_until = NULL"
        sql += " WHERE tenant = ? AND id = ? AND seq = ?"
        params += [step.tenant, step.execution_id, step.expected_seq]
        if step.fence is not None:
            sql += " AND fence = ?"
            params.append(step.fence)
        if whole is None:  # a delta goes only on a base in checkpoint_parts
            sql += " AND checkpoint = ''"
        if conn.execute(sql, params).rowcount != 1:
            self._ledger.forget(step.key)
            row = conn.execute(
                "SELECT seq, fence FROM executions WHERE tenant = ? AND id = ?",
                (step.tenant, step.execution_id),
            ).fetchone()
            if row is None:
                return CommitOutcome.NOT_FOUND
            if step.fence is not None and row[1] != step.fence:
                return CommitOutcome.LEASE_LOST
            return CommitOutcome.CONFLICT
        if whole is None:
            conn.execute(_INSERT_PART, (step.tenant, step.execution_id, seq, plan.delta))
        elif len(whole) >= DELTA_FROM:
            _write_base(conn, step.tenant, step.execution_id, seq, whole)
        elif plan.parts_stored:
            _clear_parts(conn, step.tenant, step.execution_id)
        self._ledger.wrote(step, plan)
        self._write_children(conn, step.tenant, step.execution_id, step.expected_seq, step)
        if step.debits:
            self._debit(_Tx(conn, self), step.tenant, step.debits, checked=False)
        if step.slot_released is not None:
            release_slot(conn, step.tenant, step.execution_id, step.slot_released)
        if step.flow_released:
            release_activity_slots(
                conn, step.tenant, step.flow_released, to_micros(step.updated_at)
            )
        if step.continued_as is not None and not self._insert_execution(conn, step.continued_as):
            raise StoreError(f"the continued run's id {step.continued_as.id} is taken")
        append_audit_row(conn, step.audit)
        write_outbox(_Tx(conn, self), SQLITE, step, step.expected_seq)
        return CommitOutcome.OK

    @staticmethod
    def _write_children(
        conn: sqlite3.Connection, tenant: str, execution_id: str, base_seq: int, step: StepWrite
    ) -> None:
        if step.events:
            conn.executemany(
                "INSERT INTO events (tenant, execution_id, seq, type, at, data)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                [
                    (tenant, execution_id, base_seq + i + 1, e.type, to_micros(e.at), dumps(e.data))
                    for i, e in enumerate(step.events)
                ],
            )
        if step.timers_removed:
            conn.executemany(
                "DELETE FROM timers WHERE tenant = ? AND execution_id = ? AND timer_id = ?",
                [(tenant, execution_id, t) for t in step.timers_removed],
            )
        if step.timers_armed:
            conn.executemany(
                "INSERT OR REPLACE INTO timers (tenant, execution_id, timer_id, fire_at)"
                " VALUES (?, ?, ?, ?)",
                [(tenant, execution_id, t, to_micros(at)) for t, at in step.timers_armed],
            )
            holds = [t for t, _ in step.timers_armed if t.startswith(HOLD_TIMER_PREFIX)]
            if holds:
                woken_holds(conn, tenant, execution_id, holds, to_micros(step.updated_at))

    def load(self, execution_id: str, tenant: str) -> ExecutionRecord | None:
        sql = f"SELECT {_SUMMARY_COLUMNS}, checkpoint FROM executions WHERE tenant = ? AND id = ?"
        rows = self._read(sql, (tenant, execution_id))
        if not rows:
            return None
        if rows[0]["checkpoint"] != _IN_PARTS:  # the common case: one read, no transaction
            return execution_record(rows[0], SQLITE, with_checkpoint=True)

        # In parts: the row again with them, in one read transaction (a step committed
        # between the read above and the parts would pair an old row with new parts).
        def read(conn: sqlite3.Connection) -> ExecutionRecord | None:
            found = conn.execute(sql, (tenant, execution_id)).fetchall()
            if not found:
                return None
            stored = _stored_checkpoint(conn, tenant, execution_id, found[0]["checkpoint"])
            return execution_record(found[0], SQLITE, with_checkpoint=True, checkpoint=stored)

        return self._snapshot(read)

    def list_executions(self, query: ExecutionFilter) -> Page:
        sql, params = _list_sql(query)
        rows = [execution_record(r, SQLITE, with_checkpoint=False) for r in self._read(sql, params)]
        more = len(rows) > query.limit
        items = rows[: query.limit]
        cursor = (items[-1].created_at, items[-1].id) if more and items else None
        return Page(items=items, next_cursor=cursor)

    # --- work queue ----------------------------------------------------------------------

    def _claim(self, ask: ClaimPlan) -> list[Claim]:
        """The claim of `ask` (`SQLQueue.claim`): plain, fair, or by turns."""
        until, now, fair = to_micros(ask.until), to_micros(ask.now), ask.fair
        planned: tuple[str, Any] | None
        if fair is not None and fair.turns is not None:
            planned = _claim_turns(ask, fair, until, now)
        elif fair is not None:
            planned = _claim_fair(ask, fair, until, now)
        else:
            planned = _claim_plain(ask, until, now)
        if planned is None:
            return []
        sql, params = planned
        with self._write() as conn:
            rows = conn.execute(sql, params).fetchall()
            stored = [_claimed_checkpoint(conn, r) for r in rows]
        return [claim_record(r, SQLITE, cp) for r, cp in zip(rows, stored, strict=True)]

    def claimable_tenants(
        self, now: datetime, *, partitions: Sequence[int] | None = None, of: int | None = None
    ) -> list[str]:
        shards = shards_for(partitions, of)
        sql = _CLAIMABLE_TENANTS.replace("/*shards*/", _shard_sql(shards, "e."))
        return sorted(r[0] for r in self._read(sql, (to_micros(now),)))

    def release_owner(self, owner: str) -> int:
        with self._write() as conn:
            return conn.execute(
                "UPDATE executions SET lease_owner = NULL, lease_until = NULL"
                " WHERE lease_owner = ?",
                (owner,),
            ).rowcount

    def ready_count(self, now: datetime) -> int:
        rows = self._read(
            "SELECT count(*) FROM executions WHERE ready = 1"
            " AND (lease_until IS NULL OR lease_until < ?)",
            (to_micros(now),),
        )
        return int(rows[0][0])

    # --- timers --------------------------------------------------------------------------

    def due_timers(self, now: datetime, limit: int) -> list[TimerRecord]:
        rows = self._read(
            "SELECT tenant, execution_id, timer_id, fire_at FROM timers WHERE fire_at <= ?"
            " ORDER BY fire_at LIMIT ?",
            (to_micros(now), limit),
        )
        return [from_row(TimerRecord, r, SQLITE) for r in rows]

    def next_timer_at(self) -> datetime | None:
        rows = self._read("SELECT min(fire_at) FROM timers")
        return from_micros(rows[0][0]) if rows and rows[0][0] is not None else None


class _Turn:
    """One write handed to `SQLiteStore._grouped`: its body and, once its transaction has
    ended, its answer or error."""

    __slots__ = ("body", "done", "error", "value")

    def __init__(self, body: Callable[[sqlite3.Connection], Any]) -> None:
        self.body = body
        self.done = False
        self.value: Any = None
        self.error: BaseException | None = None


class _Tx:
    """A write transaction's connection, for the shared roles (`wovyr.store.sql.Tx`)."""

    __slots__ = ("conn", "store")

    def __init__(self, conn: sqlite3.Connection, store: SQLiteStore) -> None:
        self.conn = conn
        self.store = store

    def rows(self, sql: str, params: Mapping[str, Any]) -> list[Any]:
        return self.conn.execute(sql, params).fetchall()

    def run(self, sql: str, params: Mapping[str, Any]) -> int:
        return self.conn.execute(sql, params).rowcount

    def run_many(self, sql: str, params: Iterable[Mapping[str, Any]]) -> None:
        self.conn.executemany(sql, params)

    def append_audit(self, entry: AuditEntry | None) -> AuditRecord | None:
        return append_audit_row(self.conn, entry)

    def insert_execution(self, new: NewExecution) -> bool:
        return self.store._insert_execution(self.conn, new)


class _Rollback(Exception):
    """Undo an atomic batch (caught in `commit`)."""


def _list_sql(query: ExecutionFilter) -> tuple[str, list[Any]]:
    """The page query of `list_executions`. With labels it walks the first label's rows in
    execution_labels (its key is the order of a page) and checks the others on the
    execution's labels; otherwise the executions index that matches the filters. Several
    `workflows`: one page of each (each on executions_by_workflow), merged in SQL."""
    if query.workflows is not None and not query.labels:
        parts: list[str] = []
        values: list[Any] = []
        for name in query.workflows:
            sql, more = _list_sql(replace(query, workflows=None, workflow=name))
            parts.append(f"SELECT * FROM ({sql})")
            values += more
        if not parts:
            return f"SELECT {_SUMMARY_COLUMNS} FROM executions WHERE 0", []
        union = " UNION ALL ".join(parts)
        return f"{union} ORDER BY created_at DESC, id DESC LIMIT ?", [*values, query.limit + 1]
    where: list[str] = []
    params: list[Any] = []
    e = "e." if query.labels else ""
    waiting = query.status == "running" and query.waiting
    for column, value in (
        ("tenant", query.tenant),
        ("workflow", query.workflow),
        ("status", None if waiting else query.status),
        ("parent_id", query.parent_id),
        ("rerun_of", query.rerun_of),
    ):
        if value is not None:
            where.append(f"{e}{column} = ?")
            params.append(value)
    if waiting:  # spelt as the partial index executions_waiting is, so that it serves
        where.append(f"{e}status = 'running' AND {e}waiting_on IS NOT NULL")
    elif query.waiting is not None:
        where.append(f"{e}waiting_on IS {'NOT ' if query.waiting else ''}NULL")
    if query.workflows is not None:  # with labels: checked on each row the label walks
        where.append(f"{e}workflow IN ({', '.join('?' * len(query.workflows)) or 'NULL'})")
        params += list(query.workflows)
    if query.id_prefix:  # a range of the primary key (tenant, id); ids compare as bytes
        where.append(f"{e}id >= ? AND {e}id < ?")
        params += [query.id_prefix, query.id_prefix + "\U0010ffff"]
    if query.created_after is not None:
        where.append(f"{e}created_at >= ?")
        params.append(to_micros(query.created_after))
    if query.created_before is not None:
        where.append(f"{e}created_at < ?")
        params.append(to_micros(query.created_before))
    source = "executions"
    order = "created_at DESC, id DESC"
    columns = _SUMMARY_COLUMNS
    if query.labels:
        (key, value), *others = query.labels
        source = (
            "execution_labels l JOIN executions e ON e.tenant = l.tenant AND e.id = l.execution_id"
        )
        where.append("l.tenant = e.tenant AND l.key = ? AND l.value = ?")
        params += [key, value]
        if query.tenant is not None:
            where.append("l.tenant = ?")
            params.append(query.tenant)
        for other_key, other_value in others:
            where.append("json_extract(e.labels, ?) = ?")
            params += [f'$."{other_key}"', other_value]
        order = "l.created_at DESC, l.execution_id DESC"
        columns = ", ".join(f"e.{c.strip()}" for c in _SUMMARY_COLUMNS.split(","))
    if query.cursor is not None:
        at, ident = ("l.created_at", "l.execution_id") if query.labels else ("created_at", "id")
        where.append(f"({at}, {ident}) < (?, ?)")
        params += [to_micros(query.cursor[0]), query.cursor[1]]
    sql = f"SELECT {columns} FROM {source}"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += f" ORDER BY {order} LIMIT ?"
    params.append(query.limit + 1)
    return sql, params


def _split_sql(script: str) -> list[str]:
    """The statements of a migration; a `;` ends one only where SQLite says it is complete
    (a trigger's body holds several)."""
    lines = [ln for ln in script.splitlines() if not ln.strip().startswith("--")]
    out, current = [], ""
    for piece in "\n".join(lines).split(";"):
        current += piece + ";"
        if sqlite3.complete_statement(current):
            if current.strip(" \n;"):
                out.append(current.strip().rstrip(";").strip())
            current = ""
    if current.strip(" \n;"):
        out.append(current.strip().rstrip(";").strip())
    return out


def _translate(exc: sqlite3.Error) -> StoreError:
    text = str(exc)
    if isinstance(exc, sqlite3.OperationalError) and (
        "locked" in text or "unable to open" in text or "disk I/O" in text or "full" in text
    ):
        return StoreUnavailable(f"the SQLite store failed: {text}")
    return StoreError(f"the SQLite store failed: {text}")
