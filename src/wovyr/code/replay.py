"""The replay of a workflow function (`wovyr.code.workflow`): the `Context` its steps are
asked through, and one run of the function on an execution's state that turns what it asks
into the activities of a `RevealedWorkflow` (docs/adr/0002).

A call whose step finished is handed its recorded result (one at a time, in the order the
history recorded them, as the live run received them); a call whose step has not finished
suspends the function; a call that asks for another step than the history holds at its
place stops the replay with `NonDeterminism`.
"""

from __future__ import annotations

import asyncio
import json
import random as _random
import re
import sys
import uuid as _uuid
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from pydantic import ValidationError

from wovyr.code.loop import ReplayLoop, ReplayLoopError
from wovyr.code.values import (
    NonDeterminism,
    Secret,
    StepFailed,
    as_duration,
    as_json,
    caller_line,
    error,
    literal,
    raised_error,
    slug,
    tool_name,
    unliteral,
)
from wovyr.definition.model import Activity, RevealedWorkflow, Workflow
from wovyr.engine.core.state import ExecutionState
from wovyr.statuses import ActivityStatus


class CodeWorkflow(Protocol):
    """What a replay needs of a workflow function (`wovyr.code.workflow.CodeWorkflow`,
    which this module does not import: that one replays through this one)."""

    fn: Callable[..., Coroutine[Any, Any, Any]]
    name: str
    version: str
    inputs: dict[str, Any]


__all__ = ["ENDED", "RESULT", "Context", "NonDeterminism", "Replay", "StepFailed"]

_AUTO_ID = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)_(?P<n>[0-9]+)$")
_GIVEN_ID = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,47}$")
_MAX_CALLBACKS = 1_000_000  # steps of one replay's event loop: a function that never settles
# the kinds `ctx.step` runs (the others have calls of their own: `run`, `sleep`, `signal`,
# `approval`, `child`; `shell` is left to activities a worker's own code runs)
_STEP_KINDS = frozenset({"agent", "llm", "http", "memory", "mcp"})
# what a finished step answers with: its result (the status of a step compensated since
# it completed still answers what it returned)
RESULT = frozenset(
    {
        ActivityStatus.COMPLETED,
        ActivityStatus.COMPENSATING,
        ActivityStatus.COMPENSATED,
        ActivityStatus.COMPENSATION_FAILED,
    }
)
ENDED = RESULT | {ActivityStatus.FAILED, ActivityStatus.SKIPPED}  # steps that ended


@dataclass
class Replay:
    """One run of a workflow function against an execution's state."""

    workflow: CodeWorkflow
    state: ExecutionState
    now: datetime
    # the activity models made so far, by their document (a driver keeps them across replays)
    models: dict[str, Activity] = field(default_factory=dict)
    calls: list[Activity] = field(default_factory=list)  # what the function asked, in order
    returned: bool = False
    output: Any = None
    raised: dict[str, Any] | None = None
    _ids: set[str] = field(default_factory=set)
    _n: int = 0
    _broken: dict[str, Any] | None = None
    _recorded: dict[int, str] = field(default_factory=dict)  # n -> the history's auto id
    # each call's line and the steps whose results the function took before asking for it
    # (the graph of the steps that ran: `Workflow.step_info`)
    steps: dict[str, dict[str, Any]] = field(default_factory=dict)
    published: dict[str, Any] = field(default_factory=dict)  # the function's `ctx.state`
    _since: list[str] = field(default_factory=list)  # results taken since the last call
    _after: list[str] = field(default_factory=list)  # what the last call came after
    _over: bool = False  # the replay has its answer; what its tasks ask while unwinding is not
    # recorded results the function awaits, not handed over yet (`_hand_over`)
    _awaiting: list[tuple[_Result | _Failed, asyncio.Future[None]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        for aid in self.state.activities:
            m = _AUTO_ID.match(aid)
            if m is not None:
                self._recorded[int(m["n"])] = aid

    def run(self) -> None:
        loop = ReplayLoop(_MAX_CALLBACKS)  # type: ignore[abstract]
        ctx = Context(self)
        inputs = {k: v for k, v in self.state.input.items() if k in self.workflow.inputs}
        task: asyncio.Task[Any] | None = None
        try:
            task = loop.run_until_quiet(self.workflow.fn(ctx, **inputs))
            while not task.done() and self._broken is None and self._hand_over(loop):
                pass
        except ReplayLoopError as err:
            self.raised = error("ReplayError", str(err))
        if task is not None and task.done() and self.raised is None:
            failed = task.exception()
            if failed is not None:
                self.raised = raised_error(failed)
            else:
                try:
                    self.output = json.loads(json.dumps(task.result()))
                    self.returned = True
                except (TypeError, ValueError) as err:
                    self.raised = error(
                        "TypeError",
                        f"the workflow returned a {type(task.result()).__name__} that is not "
                        f"JSON: {err}",
                    )
        if task is not None:
            self._over = True
            loop.abandon(task)
        if self._broken is None:
            asked = {c.id for c in self.calls}
            lost = [aid for aid in self.state.activities if aid not in asked]
            if lost and (self.returned or self.raised is not None or self.calls):
                self._broken = error(
                    "NonDeterminism",
                    f"the history holds step {lost[0]} but the workflow function no longer "
                    "asks for it (its code changed: register the change as a new version, "
                    "or guard it with ctx.patched)",
                )
        if self._broken is not None:
            self.raised, self.returned = self._broken, False

    def revealed(self, stored: Workflow) -> RevealedWorkflow:
        """The definition the decider runs for this replay: the stored one with the
        activities the function asked for."""
        fields = {name: getattr(stored, name) for name in Workflow.model_fields}
        fields["activities"] = list(self.calls)
        fields["output"] = literal(self.output) if self.returned else None
        return RevealedWorkflow.model_construct(
            **fields,
            held=not self.returned and self.raised is None,
            raised=self.raised,
            steps=self.steps,
        )

    # --- what a Context asks ---------------------------------------------------------------

    def ask(
        self,
        name: str,
        spec: dict[str, Any],
        given: str | None,
        line: str,
        undo: tuple[str, Mapping[str, Any] | Callable[[Any], Mapping[str, Any]]] | None = None,
    ) -> Any:
        """Record a call; its recorded result, or `_PENDING` while it has none. `undo`: the
        call's compensation, whose arguments may be made from its result."""
        if self._over:  # a `finally` that runs while the abandoned tasks are cancelled
            raise asyncio.CancelledError
        if given is not None:
            if not _GIVEN_ID.match(given) or _AUTO_ID.match(given):
                raise ValueError(
                    f"step id {given!r}: letters, digits and _ (48 at most), not ending in "
                    "_<number> (those are Wovyr's)"
                )
            aid = given
        else:
            self._n += 1
            aid = f"{slug(name)}_{self._n}"
            held = self._recorded.get(self._n)
            if held is not None and held != aid:
                self._nondeterministic(
                    f"call {self._n} at {line} asks for {aid}; the history holds {held} there"
                )
        if aid in self._ids:
            raise ValueError(f"step id {aid!r} is used twice in one execution")
        self._ids.add(aid)
        a = self.state.activities.get(aid)
        if undo is not None:
            tool, made = undo
            done = a is not None and a.status in RESULT
            args = made(a.output if a is not None else None) if callable(made) and done else made
            args = {} if callable(args) else dict(args)
            spec = {**spec, "compensate": {"tool": tool, "with": as_json(literal(args), tool)}}
        # a failure raises into the function (StepFailed), which decides what follows
        doc = {**spec, "id": aid, "description": line, "on_failure": "continue"}
        self.calls.append(self._model(doc))
        if self._since:  # the first call after the function took results: it follows them
            self._after, self._since = self._since, []
        self.steps[aid] = {"source": line, "after": list(self._after)}
        if a is None:
            return _PENDING
        if "tool" in spec and a.input is not None and a.status != ActivityStatus.PENDING:
            given_input = spec.get("with", {})
            if unliteral(given_input) != a.input:
                self._nondeterministic(
                    f"call {aid} at {line} runs {spec['tool']} with other arguments than "
                    "the history recorded"
                )
        if a.status in RESULT:
            return _Result(aid, a.output)
        if a.status == ActivityStatus.FAILED:
            return _Failed(aid, a.error or {"type": "Error", "message": "failed"})
        return _PENDING

    def _model(self, doc: dict[str, Any]) -> Activity:
        key = json.dumps(doc)  # made in the same order by the same call on every replay
        act = self.models.get(key)
        if act is None:
            try:
                act = Activity.model_validate(doc)
            except ValidationError as exc:
                problems = "; ".join(
                    f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
                )
                raise ValueError(f"step {doc['id']} at {doc['description']}: {problems}") from None
            self.models[key] = act
        return act

    def _nondeterministic(self, message: str) -> None:
        if self._broken is None:
            self._broken = error(
                "NonDeterminism",
                message + " (the code changed: register the change as a new version, or "
                "guard it with ctx.patched)",
            )
        raise NonDeterminism(message)

    def frontier(self) -> bool:
        """Whether the next numbered call is beyond what the history holds."""
        return (self._n + 1) not in self._recorded

    def _hand_over(self, loop: ReplayLoop) -> bool:
        """Hand the function the one recorded result, among those it awaits, that was recorded
        first, and run it until it is quiet again; False when it awaits none.

        A result is handed over only when nothing can run without it, one at a time in the
        order the history recorded them, as the live run received them: so parallel branches
        ask for their steps in the same order in every replay, whichever of their steps have
        finished since (a replay that handed over each result at once would let a branch
        whose step is done ask for its next one before a sibling asked for its first). A step
        that failed for good has no completion number: it is placed by the time it failed,
        after the steps completed at the same instant."""
        waiting = [(outcome, f) for outcome, f in self._awaiting if not f.done()]
        if not waiting:
            return False
        first = min(waiting, key=lambda w: self._recorded_at(w[0].step))
        self._awaiting = [w for w in waiting if w is not first]
        loop.resume(lambda: first[1].set_result(None))
        return True

    def _recorded_at(self, step: str) -> tuple[str, int, str]:
        a = self.state.activities[step]
        order = a.completion_order if a.completion_order is not None else sys.maxsize
        return (a.finished_at or "", order, step)

    def took(self, step: str) -> None:
        """The function took the result of `step`: what it asks next follows it."""
        self._since.append(step)


@dataclass(frozen=True)
class _Result:
    step: str
    value: Any


@dataclass(frozen=True)
class _Failed:
    step: str
    error: dict[str, Any]


_PENDING = object()


class Context:
    """What a workflow function does durably: every effect is a step of its execution."""

    def __init__(self, replay: Replay) -> None:
        self._replay = replay
        self.execution_id = replay.state.id
        self.workflow = replay.workflow.name
        self.input: dict[str, Any] = dict(replay.state.input)
        # what the function publishes for its queries (`@wf.query`) to read: rebuilt by each
        # replay from the steps' results, never recorded
        self.state: dict[str, Any] = replay.published

    def run(
        self,
        activity: Callable[..., Any] | str,
        /,
        *,
        id: str | None = None,
        retry: Mapping[str, Any] | int | None = None,
        timeout: float | str | timedelta | None = None,
        compensate: tuple[
            Callable[..., Any] | str, Mapping[str, Any] | Callable[[Any], Mapping[str, Any]]
        ]
        | None = None,
        concurrency: Mapping[str, Any] | None = None,
        rate_limit: Mapping[str, Any] | None = None,
        args: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> Awaitable[Any]:
        """Run a registered activity (`@wovyr.activity` function or its name) as a step with
        these keyword arguments (`args=` for names taken here, such as `timeout`).
        `compensate=(undo, args)` undoes it if the workflow fails after it completed;
        `args` may be a function of the step's result: `lambda out: {"id": out["id"]}`."""
        tool = tool_name(activity)
        given = {**(args or {}), **kwargs}
        spec: dict[str, Any] = {"tool": tool, "with": as_json(literal(given), tool)}
        if retry is not None:
            spec["retry"] = {"max_attempts": retry} if isinstance(retry, int) else dict(retry)
        if timeout is not None:
            spec["timeout"] = as_duration(timeout)
        if concurrency is not None:
            spec["concurrency"] = dict(concurrency)
        if rate_limit is not None:
            spec["rate_limit"] = dict(rate_limit)
        undo = None if compensate is None else (tool_name(compensate[0]), compensate[1])
        return self._ask(tool.rsplit(".", 1)[-1], spec, id, undo)

    def step(
        self,
        spec: Mapping[str, Any],
        *,
        id: str | None = None,
        retry: Mapping[str, Any] | int | None = None,
        timeout: float | str | timedelta | None = None,
    ) -> Awaitable[Any]:
        """A step of any kind, written as in YAML: `{"agent": {...}}`, `{"llm": {...}}`,
        `{"http": {...}}`, `{"memory": {...}}`, `{"mcp": {...}}`; its output. Values are
        data (a `${{` in them is never rendered); the tenant's side-effect policy applies
        to it at each attempt as to a YAML step's."""
        kinds = [k for k in spec if k in _STEP_KINDS]
        if len(kinds) != 1 or len(spec) != 1:
            raise ValueError(
                f"ctx.step takes one kind key ({', '.join(sorted(_STEP_KINDS))}); "
                f"got {sorted(spec)}"
            )
        (kind,) = kinds
        doc: dict[str, Any] = {kind: as_json(literal(dict(spec)), kind)[kind]}
        if retry is not None:
            doc["retry"] = {"max_attempts": retry} if isinstance(retry, int) else dict(retry)
        if timeout is not None:
            doc["timeout"] = as_duration(timeout)
        return self._ask(kind, doc, id)

    def sleep(self, duration: float | str | timedelta, *, id: str | None = None) -> Awaitable[None]:
        """A durable timer: the execution waits `duration` (seconds, "10m", a timedelta)."""
        return self._ask("sleep", {"wait": {"timer": {"after": as_duration(duration)}}}, id)

    def sleep_until(self, when: datetime, *, id: str | None = None) -> Awaitable[None]:
        """A durable timer that fires at `when` (timezone-aware)."""
        if when.tzinfo is None:
            raise ValueError("sleep_until takes a timezone-aware datetime")
        return self._ask("sleep", {"wait": {"timer": {"at": when.isoformat()}}}, id)

    def signal(
        self, name: str, *, timeout: float | str | timedelta | None = None, id: str | None = None
    ) -> Awaitable[Any]:
        """Wait for the signal `name`; its payload."""
        spec: dict[str, Any] = {"wait": {"signal": name}}
        if timeout is not None:
            spec["timeout"] = as_duration(timeout)
        return self._ask(name, spec, id)

    def approval(
        self,
        *,
        timeout: float | str | timedelta | None = None,
        approvers: list[str] | None = None,
        id: str | None = None,
    ) -> Awaitable[Any]:
        """Wait for an approval (`wovyr approve`); what the approver answered."""
        wait: dict[str, Any] = {}
        if timeout is not None:
            wait["timeout"] = as_duration(timeout)
        if approvers:
            wait["approvers"] = list(approvers)
        return self._ask("approval", {"wait": {"approval": wait}}, id)

    def child(
        self,
        workflow: CodeWorkflow | str,
        input: Mapping[str, Any] | None = None,
        *,
        version: str | None = None,
        id: str | None = None,
    ) -> Awaitable[Any]:
        """Start a child workflow (a name, or a code workflow) and wait for its output."""
        name = workflow if isinstance(workflow, str) else workflow.name
        if not isinstance(workflow, str) and version is None:
            version = workflow.version
        spec: dict[str, Any] = {"name": name, "input": as_json(literal(dict(input or {})), name)}
        if version is not None:
            spec["version"] = version
        return self._ask(name, {"workflow": spec}, id)

    def secret(self, name: str) -> Secret:
        """The tenant's secret `name`, to pass in a step's arguments: resolved in the
        attempt that runs the step, never seen by the function or recorded (as
        `${{ secrets.NAME }}` in YAML)."""
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$", name):
            raise ValueError(f"{name!r} is not a secret's name")
        return Secret(f"${{{{ secrets.{name} }}}}")

    def now(self) -> datetime:
        """The time, recorded once: a replay reads the same value."""
        value = self._value("now", self._replay.now.isoformat)
        return datetime.fromisoformat(value)

    def uuid(self) -> str:
        """A random UUID, recorded once."""
        return str(self._value("uuid", lambda: str(_uuid.uuid4())))

    def random(self) -> float:
        """A random float in [0, 1), recorded once."""
        return float(self._value("random", _random.random))

    def patched(self, patch: str) -> bool:
        """True for an execution that reaches this point running this code, False for one
        that passed it under the code before the change: `if ctx.patched("x"): new path`."""
        aid = f"patched_{patch}"
        if aid not in self._replay.state.activities and not self._replay.frontier():
            return False  # an older execution already made the calls after this point
        self._replay.ask("patched", {"set": {"patched": True}}, aid, caller_line())
        self._replay.took(aid)
        return True

    def _value(self, name: str, make: Callable[[], Any]) -> Any:
        replay = self._replay
        aid_n = replay._n + 1
        recorded = replay.state.activities.get(f"{name}_{aid_n}")
        value = make() if recorded is None or recorded.output is None else None
        outcome = replay.ask(name, {"set": {name: literal(value)}}, None, caller_line())
        replay.took(replay.calls[-1].id)
        if isinstance(outcome, _Result) and isinstance(outcome.value, dict):
            return outcome.value.get(name)
        return value

    def _ask(
        self,
        name: str,
        spec: dict[str, Any],
        given: str | None,
        undo: tuple[str, Any] | None = None,
    ) -> Awaitable[Any]:
        """Ask for a step now (at the call, in call order, naming the caller's line) and
        return what awaits its result."""
        return _awaited(self._replay, self._replay.ask(name, spec, given, caller_line(), undo))


async def _awaited(replay: Replay, outcome: Any) -> Any:
    if isinstance(outcome, _Result | _Failed):
        handed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        replay._awaiting.append((outcome, handed))
        await handed  # when the replay hands the result over (`Replay._hand_over`)
        replay.took(outcome.step)
        if isinstance(outcome, _Failed):
            raise StepFailed(outcome.step, outcome.error)
        return outcome.value
    never: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    return await never  # resolved by a later replay, never by this one
