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

import hashlib
import inspect
import json
import re
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar, get_type_hints

from wovyr.code.replay import ENDED, RESULT, Context, NonDeterminism, Replay, StepFailed
from wovyr.code.values import Secret
from wovyr.definition.model import Activity, RevealedWorkflow, Workflow
from wovyr.engine.core.state import ExecutionState
from wovyr.errors import Conflict, InputError, Problem
from wovyr.fields import NAME_PATTERN

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
_INPUT_TYPES: dict[Any, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    dict: "object",
    list: "array",
}
# (name, version) -> the workflow functions this process registered. A worker runs only
# these (the stored `code.function` is shown, never imported), and replays an execution
# with the function registered under its name and version today: the digest it pinned
# may differ (the code changed), which the replay's determinism checks and `ctx.patched`
# are for.
_REGISTRY: dict[tuple[str, str], CodeWorkflow] = {}


class CodeNotLoaded(Conflict):
    """This process has not registered the function a code workflow's execution pinned
    (an HTTP 409: the server that answers must load the module that registers it)."""


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
    steps = {aid: a.output for aid, a in state.activities.items() if a.status in RESULT}
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
        ended = frozenset(aid for aid, a in state.activities.items() if a.status in ENDED)
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


def _function_name(fn: Callable[..., Any]) -> str:
    """What a stored definition calls the function: `module.qualname`, or `file.py:qualname`
    for a file loaded by its path (whose module name is made from the path: the same
    function must be the same definition wherever the file lies)."""
    if fn.__module__.startswith("wovyr_user_"):
        return f"{Path(fn.__code__.co_filename).name}:{fn.__qualname__}"
    return f"{fn.__module__}.{fn.__qualname__}"


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
