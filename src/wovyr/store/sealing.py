"""Sealed execution payloads: a store that seals a tenant's payloads on their way in and
opens them on their way out (`SealingStore`), over any store.

A tenant whose record says `seal_payloads` (`wovyr admin tenants set T --seal-payloads`)
has every payload of its executions stored sealed: the execution's input, output and error,
its checkpoint (the folded state: activities' inputs, outputs and errors, signals' payloads,
approvals' data) and the data of each of its events. Each such value is written as a
one-key JSON object `{"$sealed": "<text>"}`, the text made by a `PayloadSealer` (the KMS's,
in `wovyr.platform.payloads`: AES-256-GCM under the tenant's data key, associated data
binding the tenant, the kind of object and the execution's id, and for an event its seq).
What the engine queries stays plain: ids, the tenant, workflow name and version, the
definition hash, status, `waiting_on`, sequence numbers, times, leases, timers' ids.

Reading is self-describing: a sealed value is opened whatever the tenant's setting is now,
so turning sealing off (or on) applies to what is written next and both kinds of rows read
back. Whether a tenant seals is read from the tenant rows at most every `refresh_seconds`
(and at once after a change made through this store): another process's change applies
here within that time.

**Unreadable payloads.** A value whose data key was shredded (`wovyr admin tenants shred`)
reads as `SHREDDED_MARKER`, the same for a value that does not decrypt (`UNREADABLE_MARKER`):
an input, output or error as that text, an event's data as `{"sealed": text}`, a
checkpoint as a minimal one built from the plain columns (the status it has; the
activities' states are gone). An execution whose checkpoint is unreadable cannot run on:
`fail_unreadable` fails it (`PayloadUnreadable`, written without payloads), which the shred
(`fail_shredded`, before and after the keys go) does for every running execution of the
tenant, and a claim does for any it meets. A process with a root key that does not unwrap
the tenant's data key gets the sealer's error (`KmsError`), never a marker: that is a
misconfiguration, not a lost payload; its claims leave such an execution to another
process. A step whose payloads cannot be sealed here (that error) is refused as
`LEASE_LOST`, the other steps of its batch written.

Observers (`add_observer`) registered here see the plain steps; the store below sees only
sealed ones.

**Sealing by declaration.** Every method of the store contract is declared here, once:
`SEALED_METHODS` (a tenant's payloads pass through it: implemented below, sealing what goes in and
opening what comes out) or `PLAIN_METHODS` (no sealed payload crosses it: forwarded to the inner
store as it is). There is no implicit forwarding: a method added to the contract and not
declared here fails `tests/contract/test_sealed_store_contract.py`, so a new method that
carries payloads cannot be stored unsealed by default. The optional capabilities pass
through as the inner store has them (`wrapped_capabilities`): timer locking sealed (the
steps it writes carry payloads), the others as they are (none carries a payload).
"""

from __future__ import annotations

import base64
import functools
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from wovyr.errors import KmsError, WovyrError
from wovyr.events import Event, EventType
from wovyr.statuses import ExecutionStatus
from wovyr.store.agent_memory import MemoryHit, MemoryItem, MemoryPut, MemoryWriteResult
from wovyr.store.artifacts import ArtifactRecord, NewArtifact
from wovyr.store.audit import AuditEntry
from wovyr.store.base import (
    Claim,
    ClaimAsk,
    CommitOutcome,
    EventRecord,
    ExecutionFilter,
    ExecutionRecord,
    NewExecution,
    Page,
    StepWrite,
    Store,
)
from wovyr.store.capabilities import Capabilities, TimerSteps, capabilities
from wovyr.store.codec import dumps, loads
from wovyr.store.flow import GatedOutcome, plain_outcomes
from wovyr.store.hooks import Observers, StoreObserver
from wovyr.store.platform import TenantRecord
from wovyr.store.records import TimerRecord
from wovyr.store.rows import created_record
from wovyr.store.schedules import ScheduleWrite
from wovyr.store.streams import StreamAppend, StreamChunk

__all__ = [
    "FORWARDED",
    "PLAIN_METHODS",
    "SEALED",
    "SEALED_METHODS",
    "SHREDDED_MARKER",
    "UNREADABLE_MARKER",
    "NotSealed",
    "PayloadKeyShredded",
    "PayloadSealer",
    "PayloadUndecryptable",
    "SealingStore",
    "fail_shredded",
    "fail_unreadable",
    "is_sealed",
]

log = logging.getLogger("wovyr.sealing")
_P = ParamSpec("_P")
_R = TypeVar("_R")

SEALED = "$sealed"
SHREDDED_MARKER = "sealed: the tenant's key was shredded"
UNREADABLE_MARKER = "sealed: does not decrypt (corrupt, or not sealed for this execution)"


class NotSealed(WovyrError, ValueError):
    """A `{"$sealed": ...}` value that is no sealer's text (a user's own data): kept as is."""


class PayloadKeyShredded(KmsError):
    """The data key that sealed the value was shredded."""


class PayloadUndecryptable(KmsError):
    """The value does not decrypt under its data key (corrupt, or moved from elsewhere)."""


class PayloadSealer(Protocol):
    """Seals and opens one tenant's payload texts; `kind` and `name` are bound into each
    (a sealed text opens only as what it was sealed as)."""

    def seal(self, tenant: str, kind: str, name: str, text: str) -> str:
        """The sealed form of `text` (with the tenant's latest data key, made when it has
        none or it was shredded)."""
        ...

    def open(self, tenant: str, kind: str, name: str, text: str) -> str:
        """The text sealed as `text`: `NotSealed` when `text` is no sealed form,
        `PayloadKeyShredded`, `PayloadUndecryptable`, or the KMS's error when this process's
        root key cannot unwrap the data key."""
        ...


def is_sealed(value: Any) -> bool:
    return type(value) is dict and len(value) == 1 and type(value.get(SEALED)) is str


# --- the names bound into each sealed value ---------------------------------------------------

_INPUT, _OUTPUT, _ERROR, _CHECKPOINT, _EVENT, _STREAM = (
    "execution.input",
    "execution.output",
    "execution.error",
    "execution.checkpoint",
    "execution.event",
    "execution.stream",
)
# A streamed text chunk is text, not a JSON value: its sealed form is this prefix and the
# sealed token (a plain chunk that happens to start so reads back as itself: NotSealed).
_SEALED_TEXT = "\x1e$sealed:"
# An artifact's bytes sealed: this prefix and the sealed token of their base64 text (no
# media type an artifact may have starts so).
_SEALED_BYTES = _SEALED_TEXT.encode("ascii")
_ARTIFACT = "artifact"


def _event_name(execution_id: str, seq: int) -> str:
    return f"{execution_id}/{seq}"


class _Unreadable(Exception):
    def __init__(self, marker: str) -> None:
        super().__init__(marker)
        self.marker = marker


def _opening(
    method: Callable[Concatenate[Any, _P], _R], open_: Callable[[SealingStore, _R], _R]
) -> Callable[Concatenate[SealingStore, _P], _R]:
    """The sealed method that asks the inner store's `method` and opens its answer with
    `open_` (what goes in carries no payload): its signature is the contract's."""
    name = method.__name__

    def opened(store: SealingStore, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        return open_(store, getattr(store.inner, name)(*args, **kwargs))

    functools.update_wrapper(opened, method)  # the contract's name, doc and signature
    return opened


class SealingStore(Store):
    """`inner` with the payloads of sealing tenants sealed by `sealer` (see the module)."""

    def __init__(
        self,
        inner: Store,
        sealer: PayloadSealer,
        *,
        refresh_seconds: float = 2.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.inner = inner
        self.sealer = sealer
        self.url = inner.url
        self._refresh = refresh_seconds
        self._monotonic = monotonic
        self._sealing: frozenset[str] = frozenset()
        self._read_at: float | None = None
        self._lock = threading.Lock()
        self._observers = Observers()
        # The plain form of each new execution being written sealed (by the id of its sealed
        # form): the inner store tells of the executions it creates, here told in plain.
        self._plain: dict[int, NewExecution] = {}
        # The continued runs of steps being committed: told by this store's own observers
        # with their step (`Observers.committed`), so not again when the inner store tells.
        self._continued: set[int] = set()
        self._timer_locking = capabilities(inner).timer_locking
        for name in FORWARDED:
            setattr(self, name, getattr(inner, name))
        inner.add_observer(_Created(self))

    def wrapped_capabilities(self, inner: Capabilities) -> Capabilities:
        """The optional capabilities of this store, given the inner store's: timer locking
        through this store (the steps it writes are sealed here), the others the inner
        store's own (migrations, snapshots, membership, notifications and event partitions
        carry no payload; a snapshot copies the rows as stored, sealed)."""
        return replace(inner, timer_locking=self if inner.timer_locking is not None else None)

    def __repr__(self) -> str:
        return f"SealingStore({self.inner!r})"

    # --- which tenants seal ------------------------------------------------------------

    def sealing(self, tenant: str) -> bool:
        """Whether `tenant`'s payloads are sealed when written now."""
        read_at = self._read_at
        if read_at is None or self._monotonic() - read_at >= self._refresh:
            self.reload_tenants()
        return tenant in self._sealing

    def reload_tenants(self) -> None:
        with self._lock:
            tenants = self.inner.list_tenants()
            self._sealing = frozenset(t.tenant for t in tenants if t.seal_payloads)
            self._read_at = self._monotonic()

    def put_tenant(self, record: TenantRecord, *, audit: AuditEntry | None = None) -> None:
        self.inner.put_tenant(record, audit=audit)
        self.reload_tenants()

    def add_observer(self, observer: StoreObserver) -> None:
        self._observers.add(observer)

    # --- values --------------------------------------------------------------------------

    def _seal(self, tenant: str, kind: str, name: str, value: Any) -> Any:
        if value is None:
            return None
        return {SEALED: self.sealer.seal(tenant, kind, name, dumps(value))}

    def _open(self, tenant: str, kind: str, name: str, value: Any) -> Any:
        """The value sealed as `value` (`value` itself when it is not sealed); `_Unreadable`
        with the marker when it cannot be opened."""
        if not is_sealed(value):
            return value
        try:
            return loads(self.sealer.open(tenant, kind, name, value[SEALED]))
        except NotSealed:
            return value
        except PayloadKeyShredded:
            raise _Unreadable(SHREDDED_MARKER) from None
        except PayloadUndecryptable:
            raise _Unreadable(UNREADABLE_MARKER) from None

    def _shown(self, tenant: str, kind: str, name: str, value: Any) -> Any:
        try:
            return self._open(tenant, kind, name, value)
        except _Unreadable as exc:
            return exc.marker

    def _seal_step(self, step: StepWrite, base: int | None = None) -> StepWrite:
        """`step` sealed; its events are numbered from `base` (its expected seq)."""
        tenant, eid = step.tenant, step.execution_id
        first = step.expected_seq if base is None else base
        events = [
            Event(e.type, e.at, self._seal(tenant, _EVENT, _event_name(eid, first + i), e.data))
            for i, e in enumerate(step.events, 1)
        ]
        continued = step.continued_as
        if continued is not None and self.sealing(continued.tenant):
            continued = self._seal_new(continued)
        return replace(
            step,
            events=events,
            checkpoint=self._seal(tenant, _CHECKPOINT, eid, step.checkpoint),
            output=self._seal(tenant, _OUTPUT, eid, step.output),
            error=self._seal(tenant, _ERROR, eid, step.error),
            continued_as=continued,
            changes=None,  # written whole: a delta would be plain text beside a sealed base
        )

    def _seal_new(self, new: NewExecution) -> NewExecution:
        return replace(
            new,
            input=self._seal(new.tenant, _INPUT, new.id, new.input),
            first_step=self._seal_step(new.first_step, base=0),  # a new run's events: 1, 2...
        )

    def _open_record(self, record: ExecutionRecord) -> ExecutionRecord:
        tenant, eid = record.tenant, record.id
        if not (
            is_sealed(record.input)
            or is_sealed(record.output)
            or is_sealed(record.error)
            or is_sealed(record.checkpoint)
        ):
            return record
        checkpoint = record.checkpoint
        if checkpoint is not None:
            try:
                checkpoint = self._open(tenant, _CHECKPOINT, eid, checkpoint)
            except _Unreadable as exc:
                checkpoint = _fallback_checkpoint(record, exc.marker)
        return replace(
            record,
            input=self._shown(tenant, _INPUT, eid, record.input),
            output=self._shown(tenant, _OUTPUT, eid, record.output),
            error=self._shown(tenant, _ERROR, eid, record.error),
            checkpoint=checkpoint,
        )

    # --- writes --------------------------------------------------------------------------

    def _sealed_new(self, new: NewExecution) -> NewExecution:
        """`new` as written (sealed when its tenant seals), its plain form remembered."""
        if not self.sealing(new.tenant):
            return new
        sealed = self._seal_new(new)
        self._plain[id(sealed)] = new
        return sealed

    def create_execution(self, new: NewExecution) -> tuple[bool, ExecutionRecord]:
        written = self._sealed_new(new)
        try:
            created, record = self.inner.create_execution(written)
        finally:
            self._plain.pop(id(written), None)
        if created:
            return True, record if written is new else created_record(new)
        return False, self._open_record(record)

    def update_schedule(self, write: ScheduleWrite, *, audit: AuditEntry | None = None) -> bool:
        written = [self._sealed_new(new) for new in write.starts]
        try:
            return self.inner.update_schedule(replace(write, starts=written), audit=audit)
        finally:
            for new in written:
                self._plain.pop(id(new), None)

    def commit(self, steps: Sequence[StepWrite], atomic: bool = False) -> list[CommitOutcome]:
        return plain_outcomes(self._commit(steps, atomic, lambda w: self.inner.commit(w, atomic)))

    def commit_gated(self, steps: Sequence[StepWrite]) -> list[GatedOutcome]:
        return self._commit(steps, False, self.inner.commit_gated)

    def _commit(
        self,
        steps: Sequence[StepWrite],
        atomic: bool,
        write: Callable[[list[StepWrite]], Sequence[GatedOutcome]],
    ) -> list[GatedOutcome]:
        if not steps:
            return []
        written: list[StepWrite] = []
        refused: dict[int, GatedOutcome] = {}
        for i, step in enumerate(steps):
            if not self.sealing(step.tenant):
                written.append(step)
                continue
            try:
                written.append(self._seal_step(step))
            except WovyrError as exc:  # no key here (KmsError): the writer stops, others go on
                if atomic:
                    raise
                log.error(
                    "execution %s of tenant %r: its step cannot be sealed (%s); it stops here",
                    step.execution_id,
                    step.tenant,
                    exc,
                )
                refused[i] = CommitOutcome.LEASE_LOST
        continued = {id(w.continued_as) for w in written if w.continued_as is not None}
        self._continued |= continued
        try:
            outcomes = iter(write(written) if written else [])
        finally:
            self._continued -= continued
        result = [refused[i] if i in refused else next(outcomes) for i in range(len(steps))]
        self._observers.committed(steps, plain_outcomes(result))
        return result

    # --- reads ---------------------------------------------------------------------------

    def load(self, execution_id: str, tenant: str) -> ExecutionRecord | None:
        record = self.inner.load(execution_id, tenant)
        return None if record is None else self._open_record(record)

    def list_executions(self, query: ExecutionFilter) -> Page:
        page = self.inner.list_executions(query)
        return replace(page, items=[self._open_record(r) for r in page.items])

    def history(
        self, execution_id: str, after_seq: int = 0, limit: int | None = None, *, tenant: str
    ) -> list[EventRecord]:
        events = self.inner.history(execution_id, after_seq, limit, tenant=tenant)
        out = []
        for event in events:
            if is_sealed(event.data):
                name = _event_name(execution_id, event.seq)
                try:
                    data = self._open(tenant, _EVENT, name, event.data)
                except _Unreadable as exc:
                    data = {"sealed": exc.marker}
                event = replace(event, data=data)  # noqa: PLW2901
            out.append(event)
        return out

    # --- the stream journal ------------------------------------------------------------------
    # The text a model streams is as much a payload as the answer it becomes: sealed too,
    # bound to its execution (a chunk's number is the store's, so not bound).

    def append_stream(self, append: StreamAppend) -> bool:
        tenant = append.tenant
        if self.sealing(tenant):
            name = f"{append.execution_id}/stream"
            chunks = [
                replace(c, text=_SEALED_TEXT + self.sealer.seal(tenant, _STREAM, name, c.text))
                if c.text
                else c
                for c in append.chunks
            ]
            append = replace(append, chunks=chunks)
        return self.inner.append_stream(append)

    def read_stream(
        self, tenant: str, execution_id: str, after: int = 0, limit: int = 500
    ) -> list[StreamChunk]:
        chunks = self.inner.read_stream(tenant, execution_id, after, limit)
        return [self._open_chunk(tenant, execution_id, c) for c in chunks]

    def _open_chunk(self, tenant: str, execution_id: str, chunk: StreamChunk) -> StreamChunk:
        if not chunk.text.startswith(_SEALED_TEXT):
            return chunk
        token = chunk.text[len(_SEALED_TEXT) :]
        try:
            text = self.sealer.open(tenant, _STREAM, f"{execution_id}/stream", token)
        except NotSealed:
            return chunk
        except PayloadKeyShredded:
            text = f"[{SHREDDED_MARKER}]"
        except PayloadUndecryptable:
            text = f"[{UNREADABLE_MARKER}]"
        return replace(chunk, text=text)

    # --- artifacts --------------------------------------------------------------------------
    # A sealing tenant's artifact bytes are sealed (their base64 text, bound to the digest);
    # the digest, media type and size stay plain. Bytes that no longer open (a shredded
    # key, corrupt) read as a missing artifact.

    def put_artifact(
        self, new: NewArtifact, *, audit: AuditEntry | None = None
    ) -> tuple[ArtifactRecord, bool]:
        if self.sealing(new.tenant):
            text = base64.b64encode(new.data).decode("ascii")
            token = self.sealer.seal(new.tenant, _ARTIFACT, new.digest, text)
            new = replace(new, data=_SEALED_BYTES + token.encode("ascii"))
        result: tuple[ArtifactRecord, bool] = self.inner.put_artifact(new, audit=audit)
        return result

    def read_artifact(self, tenant: str, digest: str) -> tuple[ArtifactRecord, bytes] | None:
        found = self.inner.read_artifact(tenant, digest)
        if found is None or not found[1].startswith(_SEALED_BYTES):
            return found
        record, data = found
        token = data[len(_SEALED_BYTES) :].decode("ascii", errors="replace")
        try:
            return record, base64.b64decode(self.sealer.open(tenant, _ARTIFACT, digest, token))
        except NotSealed:
            return found
        except (PayloadKeyShredded, PayloadUndecryptable) as exc:
            log.warning("artifact %s of tenant %r does not open: %s", digest, tenant, exc)
            return None

    # --- the work queue ------------------------------------------------------------------

    # --- agent memory ----------------------------------------------------------------------
    # A sealing tenant's memory values and texts are sealed like its payloads; embeddings
    # stay plain (the search compares them in this process: docs/security.md).

    def put_memory(
        self, put: MemoryPut, now: datetime, *, audit: AuditEntry | None = None
    ) -> MemoryWriteResult:
        if self.sealing(put.tenant):
            name = _memory_name(put.namespace, put.key)
            put = replace(
                put,
                value=self._seal(put.tenant, "memory", name, put.value),
                text=None
                if put.text is None
                else self.sealer.seal(put.tenant, "memory-text", name, put.text),
            )
        result: MemoryWriteResult = self.inner.put_memory(put, now, audit=audit)
        return result

    def _open_item(self, item: MemoryItem) -> MemoryItem:
        name = _memory_name(item.namespace, item.key)
        text = item.text
        if text is not None:
            try:
                text = self.sealer.open(item.tenant, "memory-text", name, text)
            except NotSealed:
                pass  # written before the tenant sealed
            except PayloadKeyShredded:
                text = SHREDDED_MARKER
            except PayloadUndecryptable:
                text = UNREADABLE_MARKER
        value = self._shown(item.tenant, "memory", name, item.value)
        return replace(item, value=value, text=text)

    def get_memory(
        self, tenant: str, namespace: str, keys: Sequence[str], now: datetime
    ) -> list[MemoryItem]:
        return self._open_items(self.inner.get_memory(tenant, namespace, keys, now))

    list_memory = _opening(Store.list_memory, lambda self, items: self._open_items(items))
    search_memory = _opening(Store.search_memory, lambda self, hits: self._open_hits(hits))

    def _open_items(self, items: list[MemoryItem]) -> list[MemoryItem]:
        return [self._open_item(i) for i in items]

    def _open_hits(self, hits: list[MemoryHit]) -> list[MemoryHit]:
        return [replace(h, item=self._open_item(h.item)) for h in hits]

    def claim(self, ask: ClaimAsk) -> list[Claim]:
        claims = self.inner.claim(ask)
        out = []
        for c in claims:
            if not is_sealed(c.checkpoint):
                out.append(c)
                continue
            try:
                opened = self._open(c.tenant, _CHECKPOINT, c.execution_id, c.checkpoint)
            except _Unreadable:
                fail_unreadable(self, c.tenant, c.execution_id, ask.now, fence=c.fence)
                continue
            except WovyrError as exc:  # this process cannot unwrap the key (another root key)
                log.error(
                    "execution %s of tenant %r is left to a process that can open it: %s",
                    c.execution_id,
                    c.tenant,
                    exc,
                )
                continue  # its lease runs out; the other claims go on

            out.append(replace(c, checkpoint=opened))
        self._observers.claimed(out)
        return out

    def fire_timers(
        self,
        now: datetime,
        limit: int,
        build: TimerSteps,
    ) -> list[tuple[StepWrite, CommitOutcome]]:
        plain: dict[int, StepWrite] = {}

        def sealed_build(
            timers: list[TimerRecord], records: Mapping[tuple[str, str], ExecutionRecord]
        ) -> list[StepWrite]:
            opened = {k: self._open_record(r) for k, r in records.items()}
            out = []
            for step in build(timers, opened):
                sealed = self._seal_step(step) if self.sealing(step.tenant) else step
                plain[id(sealed)] = step
                out.append(sealed)
            return out

        if self._timer_locking is None:
            raise TypeError(f"{self.inner!r} does not lock timers")
        done = self._timer_locking.fire_timers(now, limit, sealed_build)
        result = [(plain.get(id(step), step), outcome) for step, outcome in done]
        if result:
            self._observers.committed([s for s, _ in result], [o for _, o in result])
        return result


class _Created:
    """The inner store's observer: its new executions, told to the sealing store's observers
    in plain (what it commits and claims, the sealing store tells itself)."""

    def __init__(self, outer: SealingStore) -> None:
        self.outer = outer

    def created(self, new: NewExecution) -> None:
        if id(new) not in self.outer._continued:
            self.outer._observers.created(self.outer._plain.get(id(new), new))

    def committed(self, steps: Sequence[StepWrite], outcomes: Sequence[CommitOutcome]) -> None:
        return None

    def claimed(self, claims: Sequence[Claim]) -> None:
        return None


def _memory_name(namespace: str, key: str) -> str:
    """What a memory item's sealed value is bound to (a sealed value moved to another key
    does not open)."""
    return f"{namespace}/{key}"


def _fallback_checkpoint(record: ExecutionRecord, marker: str) -> dict[str, Any]:
    """The checkpoint shown for `record` when its own cannot be opened: the plain columns,
    and the marker where the payloads were."""
    checkpoint: dict[str, Any] = {
        "id": record.id,
        "workflow": record.workflow,
        "version": record.version,
        "definition_hash": record.definition_hash,
        "status": record.status,
        "input": {"sealed": marker},
        "parent_id": record.parent_id,
        "created_at": record.created_at.isoformat(),
        "updated_at": record.updated_at.isoformat(),
        "seq": record.seq,
    }
    if record.output is not None:
        checkpoint["output"] = {"sealed": marker}
    if record.status == ExecutionStatus.FAILED:
        checkpoint["error"] = {"type": "PayloadUnreadable", "message": marker}
    return checkpoint


def fail_unreadable(
    store: SealingStore,
    tenant: str,
    execution_id: str,
    at: datetime,
    *,
    fence: int | None = None,
    readable_too: bool = False,
) -> bool:
    """Fail `tenant`'s running execution `execution_id` when its sealed checkpoint cannot be
    opened (its key was shredded, or it is corrupt), or - `readable_too`, what a shred does
    first - whenever its checkpoint is sealed: it cannot run on. One step, written as it is
    (it holds no payload): `ExecutionFailed` with error `PayloadUnreadable` and the marker,
    the lease released, nothing ready. True when it was failed now (False: finished already,
    not sealed, readable, or it moved meanwhile)."""
    record = store.inner.load(execution_id, tenant)
    if (
        record is None
        or record.status != ExecutionStatus.RUNNING
        or not is_sealed(record.checkpoint)
    ):
        return False
    marker = SHREDDED_MARKER
    try:
        store._open(tenant, _CHECKPOINT, execution_id, record.checkpoint)
        if not readable_too:
            return False
    except _Unreadable as exc:
        marker = exc.marker
    error = {"type": "PayloadUnreadable", "message": marker}
    failed = replace(record, status=ExecutionStatus.FAILED)
    step = StepWrite(
        execution_id=execution_id,
        expected_seq=record.seq,
        events=[Event(EventType.EXECUTION_FAILED, at, {"error": error})],
        checkpoint={**_fallback_checkpoint(failed, marker), "error": error},
        status=ExecutionStatus.FAILED,
        updated_at=at,
        fence=fence,
        ready=False,
        release_lease=True,
        error=error,
        tenant=tenant,
    )
    outcome = store.inner.commit([step])[0]
    store._observers.committed([step], [outcome])
    if outcome is CommitOutcome.OK:
        log.warning("execution %s of tenant %r failed: %s", execution_id, tenant, marker)
    return outcome is CommitOutcome.OK


def fail_shredded(store: SealingStore, tenant: str, at: datetime, *, before: bool = False) -> int:
    """Fail every running execution of `tenant` whose sealed checkpoint no longer opens
    (after a shred), or with `before`, every one whose checkpoint is sealed (just before a
    shred: a worker's step in flight then conflicts with the failure and is dropped, never
    sealed again under a new key); return how many."""
    failed = 0
    cursor = None
    while True:
        page = store.inner.list_executions(
            ExecutionFilter(tenant=tenant, status=ExecutionStatus.RUNNING, limit=500, cursor=cursor)
        )
        for record in page.items:
            if fail_unreadable(store, tenant, record.id, at, readable_too=before):
                failed += 1
        if page.next_cursor is None:
            return failed
        cursor = page.next_cursor


# --- the declaration ------------------------------------------------------------------------

#: The contract's methods that a tenant's payloads pass through: each is implemented on
#: `SealingStore`, sealing what it writes and opening what it reads.
SEALED_METHODS = frozenset(
    {
        "create_execution",  # the input and the first step
        "commit",  # events, checkpoint, output, error (and a continued run)
        "commit_gated",
        "update_schedule",  # the executions a schedule fire starts
        "load",
        "list_executions",
        "history",
        "claim",  # the claimed checkpoint (an unreadable one fails its run)
        "append_stream",  # a model's streamed text
        "read_stream",
        "put_memory",  # agent memory values and texts
        "get_memory",
        "list_memory",
        "search_memory",
        "put_artifact",  # artifact bytes
        "read_artifact",
    }
)

#: The contract's methods that no sealed payload crosses: forwarded to the inner store as
#: they are, unless `SealingStore` implements one to keep its own state (`put_tenant`:
#: which tenants seal; `add_observer`: observers see plain steps). Not sealed by design
#: (docs/security.md): definitions, a schedule's stored input, the response cache, audit
#: details (digests), bulk actions, memory embeddings.
PLAIN_METHODS = frozenset(
    {
        "add_observer",
        # definitions and the registry
        "put_definition",
        "get_definition",
        "apply_definition",
        "registered_definition",
        "list_registered",
        # executions, the queue and timers: ids, leases, counts and times
        "workflow_names",
        "claimable_tenants",
        "renew_leases",
        "release_owner",
        "ready_count",
        "due_timers",
        "next_timer_at",
        # schedules
        "create_schedule",
        "get_schedule",
        "list_schedules",
        "delete_schedule",
        "due_schedules",
        # keys, idempotency, sessions, tenants and quotas
        "create_api_key",
        "api_key_by_hash",
        "get_api_key",
        "list_api_keys",
        "revoke_api_key",
        "touch_api_key",
        "claim_idempotency_key",
        "purge_idempotency_keys",
        "revoke_session",
        "session_revoked",
        "purge_revoked_sessions",
        "put_tenant",
        "get_tenant",
        "list_tenants",
        "quota_usage",
        "debit_quota",
        # the audit chain (digests, never payloads)
        "append_audit",
        "audit_head",
        "audit_records",
        "add_audit_anchor",
        "audit_anchors",
        # secrets and data keys (sealed by the KMS itself)
        "add_data_key",
        "data_key",
        "list_data_keys",
        "rewrap_data_key",
        "shred_data_keys",
        "scrub_data_keys",
        "put_secret",
        "get_secret",
        "list_secrets",
        "delete_secret",
        "kms_root",
        "put_kms_root",
        # model providers, MCP servers and the response cache
        "get_cached_response",
        "put_cached_response",
        "put_provider",
        "get_provider",
        "list_providers",
        "delete_provider",
        "put_mcp_server",
        "get_mcp_server",
        "list_mcp_servers",
        "delete_mcp_server",
        # bulk actions
        "create_batch",
        "get_batch",
        "list_batches",
        "batch_items",
        "claim_batch",
        "update_batch",
        # flow control: slots, buckets, keys
        "slot_state",
        "acquire_flow",
        "acquire_flows",
        "activity_slot_holders",
        "flow_keys",
        "set_rate_limit",
        "rate_limits",
        "delete_rate_limit",
        # agent memory's bookkeeping (versions, embeddings)
        "delete_memory",
        "memory_version",
        "memory_vectors",
        # event triggers and outbound webhooks: names, outcomes, ids (never a payload)
        "put_trigger",
        "get_trigger",
        "list_triggers",
        "trigger_by_hook",
        "delete_trigger",
        "record_trigger_event",
        "get_trigger_event",
        "list_trigger_events",
        "count_trigger_starts",
        "claim_dedup_key",
        "put_webhook_endpoint",
        "get_webhook_endpoint",
        "list_webhook_endpoints",
        "delete_webhook_endpoint",
        "claim_deliveries",
        "record_attempt",
        "get_delivery",
        "list_deliveries",
        "delivery_attempts",
        # artifacts' digests, media types and sizes
        "get_artifact",
        "list_artifacts",
        # retention
        "find_expired",
        "purge_executions",
        # the store itself
        "close",
    }
)

#: The plain methods `SealingStore` does not implement: each instance binds the inner
#: store's own (a plain call costs what a call on the inner store costs).
FORWARDED = tuple(sorted(PLAIN_METHODS - set(vars(SealingStore))))
