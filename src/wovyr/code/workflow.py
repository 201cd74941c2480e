"""Workflows written as Python functions, replayed into the DAG the engine runs.

```python
@wovyr.workflow(name="order", version="1")
async def order(ctx: wovyr.Context, order_id: str) -> dict:
    reserved = await ctx.run(reserve, order_id=order_id, retry={"max_attempts": 5})
    await ctx.sleep("10m")
    paid, shipped = await asyncio.gather(ctx.run(charge, amount=reserved["amount"]),
                                         ctx.run(ship, order_id=order_id))
    return {"paid": paid, "shipped": shipped}
```

Each decision replays the function from the top on the execution's state (`replay`): a
call whose activity finished returns its recorded result (or raises its recorded error)
without running again; the others are *asked*, and become the activities of a
`RevealedWorkflow` that the ordinary decider schedules, retries, times out, rate-limits
and compensates exactly as it does a YAML definition's (docs/adr/0002). The function
returning is the execution's output; raising fails it (after the compensations of the
steps that declared one). A replay that asks for another step than the history holds at
the same place fails the execution with `NonDeterminism`, naming the call and its line.

A call's id is `<name>_<n>`: the name of what it runs and its place among the calls the
function makes (`reserve_1`, `sleep_2`, ...), or the `id=` the call names.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import random as _random
import re
import sys
import traceback
import uuid as _uuid
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar, get_type_hints

from pydantic import ValidationError

from wovyr.code.loop import ReplayLoop, ReplayLoopError
from wovyr.definition.model import Activity, RevealedWorkflow, Workflow
from wovyr.engine.core.state import ExecutionState
from wovyr.errors import Conflict, InputError, Problem, WovyrError
from wovyr.fields import NAME_PATTERN
from wovyr.statuses import ActivityStatus

__all__ = [
    "CodeNotLoaded",
    "CodeWorkflow",
    "Context",
    "Driver",
    "NonDeterminism",
    "Query",
    "Secret",
    "StepFailed",
    "answer_query",
    "driver",
    "loaded",
    "registered",
    "workflow",
]

_F = TypeVar("_F", bound=Callable[..., Coroutine[Any, Any, Any]])
_AUTO_ID = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)_(?P<n>[0-9]+)$")
_GIVEN_ID = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,47}$")
_MAX_CALLBACKS = 1_000_000  # steps of one replay's event loop: a function that never settles
_INPUT_TYPES: dict[Any, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    dict: "object",
    list: "array",
}
# the kinds `ctx.step` runs (the others have calls of their own: `run`, `sleep`, `signal`,
# `approval`, `child`; `shell` is left to activities a worker's own code runs)
_STEP_KINDS = frozenset({"agent", "llm", "http", "memory", "mcp"})
# what a finished step answers with: its result (the status of a step compensated since
# it completed still answers what it returned)
_RESULT = frozenset(
    {
        ActivityStatus.COMPLETED,
        ActivityStatus.COMPENSATING,
        ActivityStatus.COMPENSATED,
        ActivityStatus.COMPENSATION_FAILED,
    }
)
_ENDED = _RESULT | {ActivityStatus.FAILED, ActivityStatus.SKIPPED}  # steps that ended

# (name, version) -> the workflow functions this process registered. A worker runs only
# these (the stored `code.function` is shown, never imported), and replays an execution
# with the function registered under its name and version today: the digest it pinned
# may differ (the code changed), which the replay's determinism checks and `ctx.patched`
# are for.
_REGISTRY: dict[tuple[str, str], CodeWorkflow] = {}


class StepFailed(WovyrError):
    """A step of a code workflow failed for good (its retries are exhausted): raised where
    the function awaits it. `error` is the step's recorded error (`type`, `message`)."""

    def __init__(self, step: str, error: Mapping[str, Any]) -> None:
        self.step = step
        self.error = dict(error)
        self.type = str(self.error.get("type", "Error"))
        super().__init__(f"step {step} failed: {self.type}: {self.error.get('message', '')}")


class CodeNotLoaded(Conflict):
    """This process has not registered the function a code workflow's execution pinned
    (an HTTP 409: the server that answers must load the module that registers it)."""


class NonDeterminism(WovyrError):
    """A replay asked for another step than the history holds: the function changed (or
    reads something it must not). The execution fails with it even if the function
    catches it."""


def workflow(
    name: str | None = None,
    *,
    version: str = "1",
    description: str | None = None,
    timeout: float | str | None = None,
) -> Callable[[_F], CodeWorkflow]:
    """Register an `async def f(ctx, **inputs)` as the workflow `name` (default: the
    function's name) at `version`. Its inputs are the parameters after `ctx`, typed by
    their annotations (str, int, float, bool, dict, list)."""

    def deco(fn: _F) -> CodeWorkflow:
        wf = CodeWorkflow(fn, name or fn.__name__.replace("_", "-"), version, description, timeout)
        _REGISTRY[(wf.name, wf.version)] = wf
        return wf

    return deco


def loaded(stored: Workflow) -> CodeWorkflow | None:
    """The function this process registered for a stored code workflow (None: not here)."""
    return _REGISTRY.get((stored.name, stored.version))


def registered() -> list[CodeWorkflow]:
    """Every code workflow this process registered, in registration order."""
    return list(_REGISTRY.values())


class CodeWorkflow:
    """A registered workflow function: what `@wovyr.workflow` returns."""

    def __init__(
        self,
        fn: Callable[..., Coroutine[Any, Any, Any]],
        name: str,
        version: str,
        description: str | None,
        timeout: float | str | None,
    ) -> None:
        if not inspect.iscoroutinefunction(fn):
            raise TypeError(f"@wovyr.workflow takes an async def; {fn.__qualname__} is not")
        if not re.match(NAME_PATTERN, name):
            raise ValueError(f"workflow name {name!r} is not a valid name")
        self.fn = fn
        self.name = name
        self.version = str(version)
        self.description = description
        self.timeout = timeout
        self.function = _function_name(fn)
        self.inputs = _inputs_of(fn)
        try:
            source = inspect.getsource(fn)
        except (OSError, TypeError):  # no source file (an interactive session)
            source = fn.__code__.co_code.hex()
        text = json.dumps([self.name, self.version, self.function, source, self.inputs])
        self.digest = "sha256:" + hashlib.sha256(text.encode()).hexdigest()
        self._definition: Workflow | None = None
        self.queries: dict[str, Callable[..., Any]] = {}

    def __repr__(self) -> str:
        return f"<code workflow {self.name} v{self.version} ({self.function})>"

    def query(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """Register `fn(q: Query, **args)` as the query named after it: it answers from a
        replay of the execution (what the function published in `ctx.state`, the steps'
        results), recording nothing."""
        self.queries[fn.__name__] = fn
        return fn

    def definition(self) -> Workflow:
        """The stored form: a definition with no activities and `code` naming this function."""
        if self._definition is None:
            metadata: dict[str, Any] = {"name": self.name, "version": self.version}
            if self.description:
                metadata["description"] = self.description
            data: dict[str, Any] = {
                "apiVersion": "wovyr/v1",
                "kind": "Workflow",
                "metadata": metadata,
                "inputs": self.inputs,
                "activities": [],
                "code": {"function": self.function, "digest": self.digest},
            }
            if self.timeout is not None:
                data["timeout"] = self.timeout
            self._definition = Workflow.model_validate(data)
        return self._definition

    def replay(
        self, state: ExecutionState, now: datetime, models: dict[str, Activity] | None = None
    ) -> Replay:
        """Run the function on `state` until it returns, raises or waits on steps that have
        not finished; what it asked for is in the result."""
        replay = Replay(self, state, now, {} if models is None else models)
        replay.run()
        return replay


@dataclass(frozen=True)
class Query:
    """What a query function reads of an execution: as its last replay left it."""

    execution_id: str
    status: str
    input: dict[str, Any]
    state: dict[str, Any]  # what the function put in `ctx.state`
    steps: dict[str, Any]  # the results of its completed steps, by id


def answer_query(
    stored: Workflow,
    state: ExecutionState,
    name: str,
    args: Mapping[str, Any] | None,
    now: datetime,
) -> Any:
    """The answer of the query `name` of a code workflow's execution (`state`, pinned to
    `stored`), from a replay of its function that records nothing. InputError: no such
    query, or arguments it does not take; Conflict: not a workflow function's execution;
    CodeNotLoaded: its function is not loaded here."""
    if stored.code is None:
        raise Conflict(
            f"execution {state.id} runs a workflow document: only a workflow function has queries",
            hint="read its activities with `wovyr workflows show`",
        )
    code = driver(stored)
    if isinstance(code, CodeNotLoaded):
        raise code
    assert code is not None
    fn = code.code.queries.get(name)
    if fn is None:
        known = ", ".join(sorted(code.code.queries)) or "none"
        raise InputError(
            [
                Problem(
                    f"workflow {stored.name} has no query {name!r}",
                    path="name",
                    hint=f"queries: {known}",
                )
            ]
        )
    replay = code.code.replay(state, now)
    steps = {aid: a.output for aid, a in state.activities.items() if a.status in _RESULT}
    view = Query(state.id, state.status, dict(state.input), replay.published, steps)
    try:
        inspect.signature(fn).bind(view, **dict(args or {}))
    except TypeError as exc:  # arguments the query does not take
        raise InputError([Problem(f"query {name}: {exc}", path="args")]) from None
    try:
        answer = fn(view, **dict(args or {}))
    except Exception as exc:  # the query's own failure: said, not a bare 500
        raise Conflict(f"query {name} raised {type(exc).__name__}: {exc}") from None
    try:
        return json.loads(json.dumps(answer))
    except (TypeError, ValueError):
        raise InputError(
            [Problem(f"query {name} answered a {type(answer).__name__}, which is not JSON")]
        ) from None


class Driver:
    """Reveals one execution's code workflow at each decision (a runner holds one)."""

    def __init__(self, stored: Workflow, code: CodeWorkflow) -> None:
        self.stored = stored
        self.code = code
        self._models: dict[str, Activity] = {}
        self._settled: frozenset[str] = frozenset()

    def moved(self, state: ExecutionState, first: bool) -> bool:
        """Whether a decision must replay the function on `state`: at its first replay, or
        when a step ended since the last one (a wait the fire of its timer completed, a
        value set), so the function can ask its next steps."""
        ended = frozenset(aid for aid, a in state.activities.items() if a.status in _ENDED)
        settled = ended | {"<finished>"} if state.finished else ended
        if not first and settled == self._settled:
            return False
        self._settled = settled
        return True

    def reveal(self, state: ExecutionState, now: datetime) -> RevealedWorkflow:
        return self.code.replay(state, now, self._models).revealed(self.stored)


def driver(stored: Workflow) -> Driver | CodeNotLoaded | None:
    """The driver of a stored code workflow whose function this process loaded; None for
    a YAML definition; why not (`CodeNotLoaded`) when this process lacks the function."""
    if stored.code is None:
        return None
    code = loaded(stored)
    if code is None:
        return CodeNotLoaded(
            f"the code workflow {stored.name} v{stored.version} ({stored.code.function}) "
            "is not loaded in this process",
            hint="load its module with --activities MODULE",
        )
    return Driver(stored, code)


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
            self.raised = _error("ReplayError", str(err))
        if task is not None and task.done() and self.raised is None:
            failed = task.exception()
            if failed is not None:
                self.raised = _raised(failed)
            else:
                try:
                    self.output = json.loads(json.dumps(task.result()))
                    self.returned = True
                except (TypeError, ValueError) as err:
                    self.raised = _error(
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
                self._broken = _error(
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
        fields["output"] = _literal(self.output) if self.returned else None
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
            aid = f"{_slug(name)}_{self._n}"
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
            done = a is not None and a.status in _RESULT
            args = made(a.output if a is not None else None) if callable(made) and done else made
            args = {} if callable(args) else dict(args)
            spec = {**spec, "compensate": {"tool": tool, "with": _json(_literal(args), tool)}}
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
            if _unliteral(given_input) != a.input:
                self._nondeterministic(
                    f"call {aid} at {line} runs {spec['tool']} with other arguments than "
                    "the history recorded"
                )
        if a.status in _RESULT:
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
            self._broken = _error(
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
        tool = _tool_name(activity)
        given = {**(args or {}), **kwargs}
        spec: dict[str, Any] = {"tool": tool, "with": _json(_literal(given), tool)}
        if retry is not None:
            spec["retry"] = {"max_attempts": retry} if isinstance(retry, int) else dict(retry)
        if timeout is not None:
            spec["timeout"] = _duration(timeout)
        if concurrency is not None:
            spec["concurrency"] = dict(concurrency)
        if rate_limit is not None:
            spec["rate_limit"] = dict(rate_limit)
        undo = None if compensate is None else (_tool_name(compensate[0]), compensate[1])
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
        doc: dict[str, Any] = {kind: _json(_literal(dict(spec)), kind)[kind]}
        if retry is not None:
            doc["retry"] = {"max_attempts": retry} if isinstance(retry, int) else dict(retry)
        if timeout is not None:
            doc["timeout"] = _duration(timeout)
        return self._ask(kind, doc, id)

    def sleep(self, duration: float | str | timedelta, *, id: str | None = None) -> Awaitable[None]:
        """A durable timer: the execution waits `duration` (seconds, "10m", a timedelta)."""
        return self._ask("sleep", {"wait": {"timer": {"after": _duration(duration)}}}, id)

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
            spec["timeout"] = _duration(timeout)
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
            wait["timeout"] = _duration(timeout)
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
        name = workflow.name if isinstance(workflow, CodeWorkflow) else workflow
        if isinstance(workflow, CodeWorkflow) and version is None:
            version = workflow.version
        spec: dict[str, Any] = {"name": name, "input": _json(_literal(dict(input or {})), name)}
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
        self._replay.ask("patched", {"set": {"patched": True}}, aid, _line())
        self._replay.took(aid)
        return True

    def _value(self, name: str, make: Callable[[], Any]) -> Any:
        replay = self._replay
        aid_n = replay._n + 1
        recorded = replay.state.activities.get(f"{name}_{aid_n}")
        value = make() if recorded is None or recorded.output is None else None
        outcome = replay.ask(name, {"set": {name: _literal(value)}}, None, _line())
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
        return _awaited(self._replay, self._replay.ask(name, spec, given, _line(), undo))


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


def _line() -> str:
    """`file.py:LINE` of the workflow code that made the current call (the first frame
    outside this package and asyncio)."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        shown = _FILES.get(frame.f_code.co_filename)
        if shown is None:
            shown = _FILES[frame.f_code.co_filename] = _shown_file(frame.f_code.co_filename)
        if shown:
            return f"{shown}:{frame.f_lineno}"
        frame = frame.f_back
    return "?"


def _shown_file(filename: str) -> str:
    """How a frame's file is shown ("" for this package's and asyncio's own frames)."""
    path = Path(filename)
    return "" if path.parent == _HERE or "asyncio" in path.parts else path.name


_HERE = Path(__file__).parent
_FILES: dict[str, str] = {}  # a frame's file name -> `_shown_file` (once per file)


def _function_name(fn: Callable[..., Any]) -> str:
    """What a stored definition calls the function: `module.qualname`, or `file.py:qualname`
    for a file loaded by its path (whose module name is made from the path: the same
    function must be the same definition wherever the file lies)."""
    if fn.__module__.startswith("wovyr_user_"):
        return f"{Path(fn.__code__.co_filename).name}:{fn.__qualname__}"
    return f"{fn.__module__}.{fn.__qualname__}"


def _slug(name: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9_]", "_", name)[:40].strip("_") or "step"
    return slug if slug[0].isalpha() else f"s_{slug}"


def _tool_name(activity: Callable[..., Any] | str) -> str:
    if isinstance(activity, str):
        return activity
    name = getattr(activity, "__wovyr_activity__", None)
    if not isinstance(name, str):
        raise TypeError(
            f"{getattr(activity, '__qualname__', activity)!r} is not a registered activity: "
            "decorate it with @wovyr.activity(NAME), or pass the activity's name"
        )
    return name


def _json(values: dict[str, Any], what: str) -> dict[str, Any]:
    """`values` as JSON, or TypeError naming the argument and its type."""
    try:
        out: dict[str, Any] = json.loads(json.dumps(values))
    except (TypeError, ValueError):
        for key, value in values.items():
            try:
                json.dumps(value)
            except (TypeError, ValueError):
                raise TypeError(
                    f"argument {key!r} of {what} is a {type(value).__name__}, which is not "
                    "JSON: a step's arguments are recorded in its history"
                ) from None
        raise
    return out


def _duration(value: float | str | timedelta) -> float | str:
    if isinstance(value, timedelta):
        return value.total_seconds()
    return value


class Secret(str):
    """A tenant secret named in a step's arguments (`ctx.secret("NAME")`): the attempt gets
    its value; the function, the history and the checkpoint only its name."""

    __slots__ = ()


def _literal(value: Any) -> Any:
    """`value` as a definition value that renders to itself: a string holding `${{` becomes
    an expression whose value is that string (data never renders as an expression); a
    `Secret` becomes the reference an attempt resolves (`${{ secrets.NAME }}`)."""
    if isinstance(value, Secret):
        return str(value)
    if isinstance(value, str):
        if "${{" not in value:
            return value
        escaped = "".join(
            f"\\x{ord(ch):02x}" if ch in '{}$"\\' or ord(ch) < 32 else ch for ch in value
        )
        return '${{ "' + escaped + '" }}'
    if isinstance(value, dict):
        return {k: _literal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_literal(v) for v in value]
    return value


def _unliteral(value: Any) -> Any:
    """What `_literal(x)` renders to: `x`."""
    if isinstance(value, str) and value.startswith('${{ "') and value.endswith('" }}'):
        return re.sub(r"\\x([0-9a-f]{2})", lambda m: chr(int(m[1], 16)), value[5:-4])
    if isinstance(value, dict):
        return {k: _unliteral(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unliteral(v) for v in value]
    return value


def _error(kind: str, message: str, **details: Any) -> dict[str, Any]:
    err: dict[str, Any] = {"type": kind, "message": message}
    if details:
        err["details"] = details
    return err


def _raised(exc: BaseException) -> dict[str, Any]:
    """The recorded error of an exception the function raised, with its traceback."""
    trace = "".join(traceback.format_exception(exc)[-20:])
    if isinstance(exc, StepFailed):  # as a YAML workflow fails when a step failed for good
        return {
            "type": "ActivityFailed",
            "activity": exc.step,
            "error": exc.error,
            "details": {"traceback": trace},
        }
    return _error(type(exc).__name__, str(exc), traceback=trace)


def _inputs_of(fn: Callable[..., Any]) -> dict[str, Any]:
    """The inputs of a workflow function: its parameters after the context."""
    params = list(inspect.signature(fn).parameters.values())[1:]
    try:
        hints = get_type_hints(fn)
    except Exception:  # annotations naming what is not importable: untyped inputs
        hints = {}
    inputs: dict[str, Any] = {}
    for p in params:
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            raise TypeError(
                f"workflow {fn.__qualname__}: parameter {p.name} must be a named parameter"
            )
        hint = hints.get(p.name)
        origin = getattr(hint, "__origin__", hint)
        spec: dict[str, Any] = {"type": _INPUT_TYPES.get(origin, "object")}
        if hint is None:
            spec["type"] = "object"
        if p.default is p.empty:
            spec["required"] = True
        else:
            spec["default"] = p.default
        inputs[p.name] = spec
    return inputs
