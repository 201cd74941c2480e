"""The engine facade: start, signal, approve, cancel, query, list and history.

Every method that changes an execution appends events and rewrites the checkpoint in one
store transaction (optimistic: it retries when the sequence moved under it). Nothing here
runs activities; workers do (see `wovyr.worker`). In-process listeners are told after each
change so a local worker reacts at once instead of at its next poll.
"""

from __future__ import annotations

import builtins
import contextlib
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from wovyr.clock import Clock, SystemClock
from wovyr.definition.inputs import resolve_inputs
from wovyr.definition.model import ChildWorkflowSpec, Workflow
from wovyr.definition.parse import load_definition, load_definition_file
from wovyr.definition.pin import canonical_json, content_hash
from wovyr.engine.activities.base import ActivityRegistry, NonRetryableError, default_registry
from wovyr.engine.decide import decide, start_events
from wovyr.engine.policy import RunActivity
from wovyr.engine.state import (
    ActivityStatus,
    ExecutionState,
    fold,
    state_from_json,
)
from wovyr.engine.steps import make_step, waiting_on
from wovyr.errors import (
    Conflict,
    DefinitionConflict,
    ExecutionFinished,
    InputError,
    NotFound,
    Problem,
    StoreError,
)
from wovyr.events import Event, EventType
from wovyr.ids import child_id, new_id, validate_execution_id
from wovyr.store import open_store
from wovyr.store.base import (
    DEFAULT_TENANT,
    CommitOutcome,
    DefinitionRecord,
    EventRecord,
    ExecutionFilter,
    ExecutionRecord,
    NewExecution,
    Page,
    StepWrite,
    Store,
)

__all__ = ["Engine", "ExecutionView"]

Listener = Callable[[str], None]
_MAX_RETRIES = 50
_SOURCE_CACHE = 256


@dataclass(frozen=True)
class ExecutionView:
    """A read-only picture of one execution, as `query` returns it."""

    id: str
    workflow: str
    version: str
    status: str
    input: dict[str, Any]
    output: Any
    error: Any
    created_at: str
    updated_at: str
    definition_hash: str
    parent_id: str | None
    event_count: int
    waiting_on: str | None
    activities: dict[str, dict[str, Any]] = field(default_factory=dict)
    pending_waits: list[dict[str, Any]] = field(default_factory=list)
    buffered_signals: dict[str, int] = field(default_factory=dict)

    @property
    def finished(self) -> bool:
        return self.status in ("completed", "failed", "cancelled")

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return asdict(self)


class Engine:
    """One public API over a store. Thread-safe; cheap to share."""

    def __init__(
        self,
        store: Store,
        *,
        clock: Clock | None = None,
        activities: ActivityRegistry | None = None,
        tenant: str = DEFAULT_TENANT,
        max_child_depth: int = 10,
        max_items: int = 10_000,
    ) -> None:
        self.store = store
        self.max_child_depth = max_child_depth
        self.max_items = max_items
        self.clock: Clock = clock or SystemClock()
        self.activities = activities or default_registry
        self.tenant = tenant
        self._definitions: dict[str, Workflow] = {}  # by content hash
        self._stored: set[tuple[str, str]] = set()  # (tenant, hash) known to be in the store
        self._sources: dict[str, tuple[Workflow, str]] = {}  # source text -> parsed, hashed
        self._listeners: list[Listener] = []
        self._lock = threading.Lock()

    def for_tenant(self, tenant: str) -> Engine:
        """The same engine (store, clock, activities, listeners) acting for `tenant`."""
        if tenant == self.tenant:
            return self
        other = Engine(
            self.store,
            clock=self.clock,
            activities=self.activities,
            tenant=tenant,
            max_child_depth=self.max_child_depth,
            max_items=self.max_items,
        )
        other._definitions = self._definitions  # content-addressed: safe to share
        other._stored = self._stored
        other._sources = self._sources
        other._listeners = self._listeners
        return other

    @classmethod
    def open(
        cls,
        url: str | None = None,
        *,
        clock: Clock | None = None,
        activities: ActivityRegistry | None = None,
    ) -> Engine:
        from wovyr.store import default_url

        return cls(open_store(url or default_url()), clock=clock, activities=activities)

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add_listener(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def remove_listener(self, listener: Listener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def notify(self, execution_id: str) -> None:
        for listener in list(self._listeners):
            listener(execution_id)

    # --- definitions ---------------------------------------------------------------------

    def register(self, definition: Workflow | str | Path) -> str:
        """Store a definition by its content hash (idempotent); return the hash."""
        return self._pin(definition)[1]

    def _pin(self, definition: Workflow | str | Path) -> tuple[Workflow, str]:
        """Parse (cached by source text), hash and store a definition once per tenant."""
        cached = self._sources.get(definition) if isinstance(definition, str) else None
        if cached is not None:
            workflow, digest = cached
        else:
            workflow = self._as_workflow(definition)
            digest = content_hash(workflow)
            if isinstance(definition, str):
                if len(self._sources) >= _SOURCE_CACHE:
                    self._sources.pop(next(iter(self._sources)))
                self._sources[definition] = (workflow, digest)
        if (self.tenant, digest) not in self._stored:
            record = DefinitionRecord(
                digest,
                workflow.name,
                workflow.version,
                canonical_json(workflow),
                self.clock.now(),
                self.tenant,
            )
            self.store.put_definition(record)
            self._stored.add((self.tenant, digest))
            self._definitions.setdefault(digest, workflow)
        return workflow, digest

    def definition(self, definition_hash: str, tenant: str | None = None) -> Workflow:
        """The pinned definition an execution runs on (cached)."""
        cached = self._definitions.get(definition_hash)
        if cached is not None:
            return cached
        record = self.store.get_definition(definition_hash, tenant or self.tenant)
        if record is None:
            raise NotFound(f"definition {definition_hash} not found")
        workflow = load_definition(record.source, filename=f"<definition {record.name}>")
        self._definitions[definition_hash] = workflow
        return workflow

    def _as_workflow(self, definition: Workflow | str | Path) -> Workflow:
        if isinstance(definition, Workflow):
            return definition
        if isinstance(definition, Path):
            return load_definition_file(definition)
        return load_definition(definition)

    def apply(self, definition: Workflow | str | Path) -> tuple[str, str]:
        """Register a definition under its name and version: ("applied" | "unchanged", hash).
        A different definition under an existing name and version is refused."""
        workflow = self._as_workflow(definition)
        digest = content_hash(workflow)
        record = DefinitionRecord(
            digest,
            workflow.name,
            workflow.version,
            canonical_json(workflow),
            self.clock.now(),
            self.tenant,
        )
        outcome = self.store.apply_definition(record)  # type: ignore[attr-defined]
        if outcome == "conflict":
            raise DefinitionConflict(
                f"{workflow.name} version {workflow.version} is already applied with "
                "different content",
                hint="bump metadata.version to apply a new version",
            )
        self._stored.add((self.tenant, digest))
        self._definitions.setdefault(digest, workflow)
        return str(outcome), digest

    def named(self, name: str, version: str | None = None) -> tuple[Workflow, str]:
        """A registered definition by name (the latest applied version, or `version`);
        falls back to the newest stored definition of that name (e.g. from `wovyr run`)."""
        registry = getattr(self.store, "registered_definition", None)
        record = registry(name, version, self.tenant) if registry else None
        if record is None and version is None:
            record = self.store.latest_definition(name, self.tenant)
        if record is None:
            what = f"{name!r} version {version!r}" if version else repr(name)
            raise NotFound(
                f"no workflow {what} is registered",
                hint="apply it with `wovyr definitions apply FILE`",
            )
        return self.definition(record.hash), record.hash

    def resolve(self, definition_or_name: Workflow | str | Path) -> tuple[Workflow, str]:
        """(definition, hash) for a model, YAML/JSON text, a file path or a registered name."""
        if isinstance(definition_or_name, str) and "\n" not in definition_or_name:
            path = Path(definition_or_name)
            if not path.suffix:
                return self.named(definition_or_name)
            definition_or_name = path
        return self._pin(definition_or_name)

    # --- start ---------------------------------------------------------------------------

    def start(
        self,
        definition_or_name: Workflow | str | Path,
        input: Mapping[str, Any] | None = None,
        *,
        execution_id: str | None = None,
        parent_id: str | None = None,
        lease_owner: str | None = None,
        lease_seconds: float = 30.0,
    ) -> ExecutionRecord:
        """Start an execution; starting an id that exists returns that execution unchanged."""
        workflow, digest = self.resolve(definition_or_name)
        if execution_id is not None:
            try:
                validate_execution_id(execution_id)
            except ValueError as exc:
                raise InputError([Problem(str(exc), path="execution_id")]) from None
            existing = self.store.load(execution_id, self.tenant)
            if existing is not None:
                return existing
        new = self.prepare_start(
            workflow,
            digest,
            input,
            execution_id=execution_id,
            parent_id=parent_id,
            lease_owner=lease_owner,
            lease_seconds=lease_seconds,
        )
        created, record = self.store.create_execution(new)
        if created:
            self.notify(new.id)
        return record

    def prepare_start(
        self,
        workflow: Workflow,
        digest: str,
        input: Mapping[str, Any] | None = None,
        *,
        execution_id: str | None = None,
        parent_id: str | None = None,
        lease_owner: str | None = None,
        lease_seconds: float = 30.0,
        extra: dict[str, Any] | None = None,
    ) -> NewExecution:
        """The row and first step of a new execution, for a store to create (maybe together
        with other writes, as a schedule fire does). When `lease_owner` will drive it, the
        first decision (the root activities' `ActivityStarted`) rides in the same commit."""
        inputs = resolve_inputs(workflow, input)
        now = self.clock.now()
        exec_id = execution_id or new_id(now)
        events = start_events(workflow, digest, inputs, now, parent_id=parent_id, extra=extra)
        empty = ExecutionState(id=exec_id)
        state = fold(events, empty)
        if lease_owner is not None:
            decision = decide(workflow, state, now, max_items=self.max_items)
            assert decision.state is not None
            events, state = events + decision.events, decision.state
        step = make_step(exec_id, empty, state, events, now, ready=True)
        return NewExecution(
            id=exec_id,
            tenant=self.tenant,
            workflow=workflow.name,
            version=workflow.version,
            definition_hash=digest,
            created_at=now,
            input=inputs,
            first_step=step,
            parent_id=parent_id,
            lease_owner=lease_owner,
            lease_until=now + timedelta(seconds=lease_seconds) if lease_owner else None,
        )

    # --- external changes ----------------------------------------------------------------

    def signal(self, execution_id: str, name: str, payload: Any = None) -> ExecutionView:
        """Deliver a signal; buffered until an activity waits for `name`."""
        if not name or not isinstance(name, str):
            raise InputError([Problem("a signal needs a name", path="name")])

        def events(state: ExecutionState, workflow: Workflow) -> list[Event]:
            self._require_running(state)
            return [
                Event(
                    EventType.SIGNAL_RECEIVED, self.clock.now(), {"name": name, "payload": payload}
                )
            ]

        return self._append(execution_id, events)

    def approve(
        self,
        execution_id: str,
        activity_id: str,
        approved: bool = True,
        *,
        by: str | None = None,
        comment: str | None = None,
    ) -> ExecutionView:
        """Decide an approval wait (before it is reached, the decision is kept until it is)."""

        def events(state: ExecutionState, workflow: Workflow) -> list[Event]:
            self._require_running(state)
            try:
                act = workflow.activity(activity_id)
            except KeyError:
                raise NotFound(
                    f"execution {execution_id} has no activity {activity_id!r}"
                ) from None
            if act.wait is None or act.wait.approval is None:
                raise Conflict(f"activity {activity_id!r} is not an approval")
            current = state.activity(activity_id)
            if current.status not in (ActivityStatus.PENDING, ActivityStatus.WAITING):
                raise Conflict(f"approval {activity_id!r} is already {current.status}")
            if activity_id in state.approvals:
                raise Conflict(f"approval {activity_id!r} was already decided")
            approvers = act.wait.approval.approvers
            if approvers and by not in approvers:
                raise Conflict(
                    f"{by!r} may not decide {activity_id!r}",
                    hint=f"approvers: {', '.join(approvers)}",
                )
            return [
                Event(
                    EventType.APPROVAL_DECIDED,
                    self.clock.now(),
                    {
                        "activity": activity_id,
                        "approved": bool(approved),
                        "by": by,
                        "comment": comment,
                    },
                )
            ]

        return self._append(execution_id, events)

    def cancel(
        self, execution_id: str, reason: str | None = None, *, by: str | None = None
    ) -> ExecutionView:
        """Cancel: `ExecutionCancelled` is durable when this returns; late results are refused."""

        def events(state: ExecutionState, workflow: Workflow) -> list[Event]:
            self._require_running(state)
            return [
                Event(EventType.EXECUTION_CANCELLED, self.clock.now(), {"reason": reason, "by": by})
            ]

        view = self._append(execution_id, events)
        for child in self.store.list_executions(
            ExecutionFilter(
                tenant=self.tenant, parent_id=execution_id, status="running", limit=1000
            )
        ).items:
            with contextlib.suppress(ExecutionFinished):
                self.cancel(child.id, reason=f"parent {execution_id} cancelled", by=by)
        return view

    def _require_running(self, state: ExecutionState) -> None:
        if state.finished:
            raise ExecutionFinished(f"execution {state.id} is already {state.status}")

    def _append(
        self,
        execution_id: str,
        make_events: Callable[[ExecutionState, Workflow], list[Event]],
    ) -> ExecutionView:
        for _ in range(_MAX_RETRIES):
            record = self._load(execution_id)
            state = state_from_json(record.checkpoint or {})
            workflow = self.definition(record.definition_hash)
            events = make_events(state, workflow)
            after = fold(events, state)
            step = make_step(execution_id, state, after, events, self.clock.now(), ready=True)
            outcome = self.commit_step(step, after)
            if outcome is CommitOutcome.OK:
                self.notify(execution_id)
                return self._view(record, after)
            if outcome is CommitOutcome.NOT_FOUND:
                break
        else:
            raise StoreError(f"execution {execution_id} kept changing; try again")
        raise NotFound(f"execution {execution_id} not found")

    def commit_step(self, step: StepWrite, after: ExecutionState) -> CommitOutcome:
        """Commit one step. When it finishes a child workflow, `ChildFinished` is appended to
        the parent in the SAME transaction, so a parent never misses its child's end."""
        parent = after.parent
        if not (after.finished and parent):
            return self.store.commit([step])[0]
        for _ in range(_MAX_RETRIES):
            record = self.store.load(parent["id"], tenant=None)
            if record is None or record.status != "running":
                return self.store.commit([step])[0]
            before = state_from_json(record.checkpoint or {})
            now = self.clock.now()
            event = Event(
                EventType.CHILD_FINISHED,
                now,
                {
                    "activity": parent["activity"],
                    "index": parent.get("index"),
                    "attempt": parent.get("attempt"),
                    "child": after.id,
                    "status": after.status,
                    "output": after.output,
                    "error": after.error,
                },
            )
            parent_step = make_step(
                record.id, before, fold([event], before), [event], now, ready=True
            )
            own, theirs = self.store.commit([step, parent_step], atomic=True)
            if own is not CommitOutcome.OK:
                return own
            if theirs is CommitOutcome.OK:
                self.notify(record.id)
                return own
        raise StoreError(f"the parent of {after.id} kept changing; try again")

    def start_child(self, parent: ExecutionState, run: RunActivity) -> str:
        """Start (or find) the child workflow of one attempt of a `workflow` activity."""
        spec = ChildWorkflowSpec.model_validate(run.input)
        base = spec.id or child_id(parent.id, run.activity_id, run.index)
        execution_id = base if run.attempt == 1 else f"{base}~{run.attempt}"
        if self.store.load(execution_id, self.tenant) is not None:
            return execution_id
        if parent.depth + 1 > self.max_child_depth:
            raise NonRetryableError(
                f"child workflow depth limit ({self.max_child_depth}) reached: "
                f"{parent.workflow} would start {spec.name} at depth {parent.depth + 1} "
                "(a workflow that starts itself without end?)",
                type="ChildDepthExceeded",
            )
        workflow, digest = self.named(spec.name, spec.version)
        origin = {
            "id": parent.id,
            "activity": run.activity_id,
            "index": run.index,
            "attempt": run.attempt,
        }
        new = self.prepare_start(
            workflow,
            digest,
            spec.input,
            execution_id=execution_id,
            parent_id=parent.id,
            extra={"parent": origin, "depth": parent.depth + 1},
        )
        created, _ = self.store.create_execution(new)
        if created:
            self.notify(execution_id)
        return execution_id

    def fire_due_timers(self, limit: int = 500) -> int:
        """Fire the timers due now, up to `limit`, in ONE transaction (each execution's due
        timers become `TimerFired` events in one step); returns how many fired. A step that
        conflicts with a concurrent change is left for the next pass: its rows stay due."""
        now = self.clock.now()
        due: dict[str, list[str]] = {}
        for timer in self.store.due_timers(now, limit):
            due.setdefault(timer.execution_id, []).append(timer.timer_id)
        steps, counts = [], []
        for execution_id, timer_ids in due.items():
            record = self.store.load(execution_id, tenant=None)
            if record is None:
                continue
            state = state_from_json(record.checkpoint or {})
            events = [
                Event(EventType.TIMER_FIRED, now, {"timer": t, "fired_at": now.isoformat()})
                for t in timer_ids
                if t in state.timers
            ]
            after = fold(events, state)
            step = make_step(execution_id, state, after, events, now, ready=bool(events))
            stale = [t for t in timer_ids if t not in state.timers]
            if not events:  # stale rows only: remove them without waking the execution
                step = replace(step, timers_removed=stale, ready=record.ready)
            else:
                step = replace(step, timers_removed=[*step.timers_removed, *stale])
            steps.append(step)
            counts.append(len(events))
        fired = 0
        if steps:
            for step, count, outcome in zip(steps, counts, self.store.commit(steps), strict=True):
                if outcome is CommitOutcome.OK and count:
                    fired += count
                    self.notify(step.execution_id)
        return fired

    # --- reads ---------------------------------------------------------------------------

    def _load(self, execution_id: str) -> ExecutionRecord:
        record = self.store.load(execution_id, self.tenant)
        if record is None:
            raise NotFound(f"execution {execution_id} not found")
        return record

    def query(self, execution_id: str) -> ExecutionView:
        """The live state: appends no event and takes no lease."""
        record = self._load(execution_id)
        return self._view(record, state_from_json(record.checkpoint or {}))

    def get(self, execution_id: str) -> ExecutionRecord:
        return self._load(execution_id)

    def list(
        self,
        *,
        workflow: str | None = None,
        status: str | None = None,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        parent_id: str | None = None,
        limit: int = 50,
        cursor: tuple[datetime, str] | None = None,
    ) -> Page:
        """Executions newest first; pass `page.next_cursor` back for the next page."""
        if not 1 <= limit <= 1000:
            raise InputError([Problem("limit must be between 1 and 1000", path="limit")])
        return self.store.list_executions(
            ExecutionFilter(
                tenant=self.tenant,
                workflow=workflow,
                status=status,
                created_after=created_after,
                created_before=created_before,
                parent_id=parent_id,
                limit=limit,
                cursor=cursor,
            )
        )

    def history(
        self, execution_id: str, after_seq: int = 0, limit: int | None = None
    ) -> builtins.list[EventRecord]:
        self._load(execution_id)
        return self.store.history(execution_id, after_seq, limit)

    def _view(self, record: ExecutionRecord, state: ExecutionState) -> ExecutionView:
        workflow = self.definition(record.definition_hash)
        activities: dict[str, dict[str, Any]] = {}
        pending: builtins.list[dict[str, Any]] = []
        for act in workflow.activities:
            a = state.activity(act.id)
            activities[act.id] = {
                "status": a.status,
                "kind": act.kind,
                "attempt": a.attempt,
                "needs": act.needs,
                "input": a.input,
                "output": a.output,
                "error": a.error,
                "started_at": a.started_at,
                "finished_at": a.finished_at,
                "next_attempt_at": a.next_attempt_at,
                "wait": a.wait,
                "skip_reason": a.skip_reason,
                "child": a.child,
                "items": [
                    {k: item.get(k) for k in ("status", "attempt", "output", "error", "child")}
                    for item in a.items
                ]
                if a.items is not None
                else None,
            }
            if a.status == ActivityStatus.WAITING and a.wait:
                pending.append({"activity": act.id, **a.wait})
        status = state.status
        if status == "running":
            busy = any(a.status == ActivityStatus.RUNNING for a in state.activities.values())
            if state.compensation is not None:
                status = "compensating"
            elif not busy and (pending or waiting_on(state)):
                status = "waiting"
        return ExecutionView(
            id=record.id,
            workflow=state.workflow,
            version=state.version,
            status=status,
            input=state.input,
            output=state.output,
            error=state.error,
            created_at=state.created_at,
            updated_at=state.updated_at,
            definition_hash=state.definition_hash,
            parent_id=state.parent_id,
            event_count=state.seq,
            waiting_on=waiting_on(state),
            activities=activities,
            pending_waits=pending,
            buffered_signals={k: len(v) for k, v in state.signals.items()},
        )
