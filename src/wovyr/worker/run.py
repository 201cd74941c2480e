"""Foreground runs: start (or resume) one execution and drive it, with everything it needs,
in this process.

An execution needs more than its own steps: the child workflows it starts (and theirs), the
items of a map over children, retry back-offs, timers, and the holds of flow control (a
rate limit's next unit, a concurrency key's free slot). A foreground run drives that whole
tree and sleeps (on the engine's clock) until a timer that is due within `wait_up_to`
seconds; it stops only when the root execution has finished, or when what is left waits for
the outside world: a signal, an approval, or a timer further away than `wait_up_to`. Those
are returned as `Wait`s, each naming what would continue it. Parts of the tree driven by
another process (a `wovyr worker`) are waited for, and their leases taken over when they
expire, as any worker would.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from wovyr.definition.model import Workflow
from wovyr.engine.core.state import ActivityStatus, ExecutionState, state_from_json
from wovyr.engine.engine import Engine, ExecutionView
from wovyr.worker.worker import Worker

__all__ = ["DEFAULT_WAIT_UP_TO", "Foreground", "Wait", "arun_workflow", "drive", "run_workflow"]

DEFAULT_WAIT_UP_TO = 60.0
# Timers a tree waits on. Others are deadlines (an approval's or the workflow's timeout):
# they end a wait badly, they are not what it waits for.
_WAITED_TIMERS = {
    "retry": "retry",
    "wait": "timer",
    "repeat": "repeat",
    "quota": "quota",
    "flow": "flow",
}


@dataclass(frozen=True)
class Wait:
    """What a stopped foreground run waits for, in one execution of its tree: a `signal`
    (`name`), an `approval` (`approvers`, empty when anyone may decide), or a `timer`, a
    `retry` back-off, the next iteration of a `repeat`, the end of a `quota` hold (the
    tenant's activity seconds used up) or of a `flow` hold (a rate limit or a concurrency
    key; `reason` says which) due at `fire_at` (ISO 8601), later than the run was allowed
    to wait."""

    execution_id: str
    activity: str
    kind: str
    name: str | None = None
    approvers: tuple[str, ...] = ()
    fire_at: str | None = None
    item: int | None = None
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "approvers": list(self.approvers)}


@dataclass(frozen=True)
class Foreground:
    """How a foreground run ended: the root's `view` (its status `waiting` whenever the run
    stopped before the end, whatever part of the tree waits) and, then, the `waits`."""

    view: ExecutionView
    waits: tuple[Wait, ...] = ()

    @property
    def status(self) -> str:
        return self.view.status


@dataclass
class _Look:
    """One look at the unfinished part of a tree."""

    root: ExecutionState | None = None
    members: list[str] = dataclasses.field(default_factory=list)
    waits: list[Wait] = dataclasses.field(default_factory=list)
    next_due: datetime | None = None  # the first timer the tree waits on
    elsewhere: bool = False  # some member is leased or runnable: another process drives it


def _look(engine: Engine, root_id: str) -> _Look:
    """The tree under `root_id` as the store holds it now (finished members left out)."""
    look = _Look()
    queue, seen = [root_id], set()
    while queue:
        execution_id = queue.pop()
        if execution_id in seen:
            continue
        seen.add(execution_id)
        record = engine.store.load(execution_id, engine.tenant)
        if record is None:
            continue
        state = state_from_json(record.checkpoint or {})
        if execution_id == root_id:
            look.root = state
        if state.finished:
            continue
        look.members.append(execution_id)
        look.elsewhere |= record.ready or record.lease_owner is not None
        queue.extend(_children(state))
        look.waits.extend(_outside_waits(state))
        for timer in state.timers.values():
            kind = _WAITED_TIMERS.get(timer.get("purpose") or "")
            if kind is None:
                continue
            fire_at = datetime.fromisoformat(timer["fire_at"])
            look.next_due = fire_at if look.next_due is None else min(look.next_due, fire_at)
            look.waits.append(
                Wait(
                    execution_id,
                    timer.get("activity") or "",
                    kind,
                    fire_at=timer["fire_at"],
                    item=timer.get("item"),
                    reason=timer.get("reason") if kind == "flow" else None,
                )
            )
    return look


def _children(state: ExecutionState) -> list[str]:
    found = []
    for act in state.activities.values():
        if act.status == ActivityStatus.WAITING and act.child:
            found.append(act.child)
        if act.status == ActivityStatus.WAITING and act.wait and act.wait.get("children"):
            found.extend(act.wait["children"].values())  # an agent's workflow tools
        for item in act.items or ():
            if item.get("child") and item.get("status") in ActivityStatus.ACTIVE:
                found.append(item["child"])
    return found


def _outside_waits(state: ExecutionState) -> list[Wait]:
    """The signals and approvals this execution waits for (undecided ones only)."""
    waits = []
    for aid, act in state.activities.items():
        wait = act.wait or {}
        if act.status != ActivityStatus.WAITING:
            continue
        if wait.get("kind") == "signal":
            waits.append(Wait(state.id, aid, "signal", name=wait.get("name")))
        elif wait.get("kind") == "approval" and aid not in state.approvals:
            approvers = tuple(wait.get("approvers") or ())
            waits.append(Wait(state.id, aid, "approval", approvers=approvers))
    return waits


class _Tree:
    """The executions a foreground run may claim: its root and every descendant. Children
    started while it runs are learned from the engine's notifications (one load each)."""

    def __init__(self, engine: Engine, members: list[str]) -> None:
        self.engine = engine
        self.members = dict.fromkeys(members)
        self.changed = asyncio.Event()
        self._heard: list[str] = []
        self._lock = threading.Lock()
        self._loop = asyncio.get_running_loop()

    def heard(self, tenant: str, execution_id: str) -> None:
        """An engine listener: called from any thread after a change."""
        if tenant != self.engine.tenant:  # the tree is of one tenant
            return
        with self._lock:
            self._heard.append(execution_id)
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody listens
            self._loop.call_soon_threadsafe(self.changed.set)

    def ids(self) -> list[str]:
        with self._lock:
            heard, self._heard = self._heard, []
        for execution_id in dict.fromkeys(heard):
            if execution_id in self.members:
                continue
            record = self.engine.store.load(execution_id, self.engine.tenant)
            if record is not None and record.parent_id in self.members:
                self.members[execution_id] = None
        return list(self.members)


async def drive(
    worker: Worker,
    execution_id: str,
    *,
    wait_up_to: float = DEFAULT_WAIT_UP_TO,
    poll: float = 1.0,
) -> Foreground:
    """Drive execution `execution_id` and its descendants with `worker` until the execution
    finishes or only waits on the outside world (see the module's docstring). Timers due
    within `wait_up_to` seconds are slept for on the engine's clock; parts of the tree that
    another process drives are looked at again every `poll` seconds."""
    engine = worker.engine
    tree = _Tree(engine, [execution_id])
    engine.add_listener(tree.heard)
    try:
        while True:
            await worker.run_until_idle(only=tree.ids)
            tree.changed.clear()
            look = await asyncio.to_thread(_look, engine, execution_id)
            if look.root is None or look.root.finished:
                return Foreground(engine.query(execution_id, follow=False))
            tree.members = dict.fromkeys(look.members)
            now = engine.clock.now()
            if look.elsewhere:
                delay = poll
            elif look.next_due is not None and (look.next_due - now).total_seconds() <= wait_up_to:
                delay = min(poll, max(0.0, (look.next_due - now).total_seconds()))
            else:
                return _stopped(engine.query(execution_id), look, now)
            await _nap(engine, tree.changed, delay)
    finally:
        engine.remove_listener(tree.heard)


def _stopped(view: ExecutionView, look: _Look, now: datetime) -> Foreground:
    """A run that stops before the end shows `waiting`, whatever part of its tree waits."""
    waits = [w for w in look.waits if w.fire_at is None or datetime.fromisoformat(w.fire_at) > now]
    return Foreground(dataclasses.replace(view, status="waiting"), tuple(waits))


async def _nap(engine: Engine, changed: asyncio.Event, seconds: float) -> None:
    """Sleep `seconds` on the engine's clock, or less if something changes in this process."""
    nap = asyncio.ensure_future(engine.clock.sleep(seconds))
    poke = asyncio.ensure_future(changed.wait())
    try:
        await asyncio.wait([nap, poke], return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (nap, poke):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def arun_workflow(
    engine: Engine,
    definition: Workflow | str | None = None,
    input: Mapping[str, Any] | None = None,
    *,
    name: str | None = None,
    version: str | None = None,
    path: Path | None = None,
    execution_id: str | None = None,
    wait_up_to: float = DEFAULT_WAIT_UP_TO,
) -> ExecutionView:
    """`run_workflow` for a caller already inside an event loop (await it)."""
    worker = Worker(engine)
    try:
        record = await worker.start(
            definition, input, name=name, version=version, path=path, execution_id=execution_id
        )
        return (await drive(worker, record.id, wait_up_to=wait_up_to)).view
    finally:
        await worker.close()


def run_workflow(
    engine: Engine,
    definition: Workflow | str | None = None,
    input: Mapping[str, Any] | None = None,
    *,
    name: str | None = None,
    version: str | None = None,
    path: Path | None = None,
    execution_id: str | None = None,
    wait_up_to: float = DEFAULT_WAIT_UP_TO,
) -> ExecutionView:
    """Start (or resume) an execution and drive it in this process, with its child workflows,
    map items, retry back-offs and the timers due within `wait_up_to` seconds, until it
    completes or fails; or until it waits for a signal, an approval or a later timer (its
    status is then `waiting`). Name exactly one of `definition` (a model or YAML/JSON text),
    `path` (a file) or `name` (registered). Inside a running event loop, use `arun_workflow`."""
    return asyncio.run(
        arun_workflow(
            engine,
            definition,
            input,
            name=name,
            version=version,
            path=path,
            execution_id=execution_id,
            wait_up_to=wait_up_to,
        )
    )
