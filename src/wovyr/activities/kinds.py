"""The table of activity kinds: each kind is registered once, with everything it needs.

An activity names its kind by a key (`tool: ...`, `http: {...}`, `wait: {...}`). A kind is
one `ActivityKind` registered here by its own module (see `wovyr.activities.builtin`). Its
declared part (`model`, `spec`, `settle`, attempts, `compensates`, `per_item`,
`repeat_lost`, `secrets`) is a `wovyr.kinds.Declaration`, which registering it declares in
`wovyr.kinds.DECLARED`: the language and the decider read only that table, and import no
activity code (the built-in kinds are declared in `wovyr.kinds.steps`).

- `model`: the pydantic model of the keys the kind owns in an activity (`tool` owns `tool`
  and `with`; `http` owns `http`). The workflow model validates those keys with it, so
  errors are located at the key, and dumps them back unchanged (content hashes hold).
- `spec`: the spec builder - the part of a validated step rendered with expressions when
  an attempt is scheduled (its result is recorded as the attempt's input).
- `execute`: runs one attempt from the rendered input, or `None` for kinds the pure decider
  settles itself (`settle="value"`: the rendered spec is the output; `settle="wait"`: a
  signal, approval or timer).
- the JSON Schema fragment is the model's own schema (`json_schema` below), merged into the
  workflow schema by `wovyr.definition.schema`.
- `preflight` (optional): what would fail given the handlers loaded here (a `tool` that no
  handler is registered as, `with:` keys its handler does not take), checked from the
  validated step before a foreground `wovyr run` starts and by `wovyr validate --activities`.
- `secrets`: the kind's rendered input may reference `${{ secrets.NAME }}` (resolved by the
  worker at dispatch into its in-memory copy only): kinds whose input is only handed to the
  attempt. Kinds whose rendered spec is stored as a value (`set`), or handed on to be stored
  (a child workflow's inputs), must not.
- `redact` (optional): the rendered input as it may be shown (API, UI, CLI), with the
  fields known to hold credentials (an `Authorization` header, a `secret_env` entry)
  masked even when they hold literals.
- `needs`: the services its attempts are handed in `Dispatch` (`models`, `mcp_servers`,
  `memory_namespaces`, `journal`, `stream`, `child_tools`, `start_child`, `sandbox`: see
  `NEED_FIELDS`); every other one is None.
  `needs_for` (optional) narrows them for one attempt from its rendered input (an `agent`
  reads the tenant's MCP servers only when its tools name one). The worker assembles
  exactly these and names no kind.
- `usage` (optional): what an attempt's output says it used of the tenant's daily model
  budgets (tokens, cost), debited by the commit that records the output.
- `side_effects`: the kind enforces the tenant's `SideEffectPolicy` when it runs (the worker
  reads the policy for each attempt of such a kind and hands it over in `Dispatch.policy`);
  `admits` (optional) says what a policy refuses of a step before anything runs (`shell`
  when shell is off, an `http` URL at a literal private address): checked whenever a
  definition is accepted for a tenant (start, apply, schedule create).

A kind that misses a piece fails when it is registered (a type error for mypy, a
`ConfigError` at import), never with a silent `None` at run time.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol, get_args

from wovyr.activities.base import ActivityRegistry
from wovyr.activities.policy import SideEffectPolicy
from wovyr.errors import ConfigError
from wovyr.events import EventData
from wovyr.kinds.table import DECLARED, Declaration, KindTable, Settle, declare

__all__ = [
    "KINDS",
    "NEEDS",
    "NEED_FIELDS",
    "ActivityKind",
    "ActivityKinds",
    "Admits",
    "AwaitApproval",
    "AwaitChildren",
    "ChildStarted",
    "ChildTools",
    "Executor",
    "Generation",
    "Journal",
    "KindTable",
    "Need",
    "Preflight",
    "SecretResolver",
    "Settle",
    "StepProblem",
    "StreamSink",
    "Usage",
    "WorkflowTool",
    "register_kind",
]

#: The services an attempt may be handed (named apart from every kind: a worker names none).
Need = Literal[
    "child_tools",
    "journal",
    "mcp_servers",
    "memory_namespaces",
    "models",
    "sandbox",
    "start_child",
    "stream",
]
NEEDS: frozenset[str] = frozenset(get_args(Need))
#: The field of `Dispatch` that holds each service.
NEED_FIELDS: dict[str, str] = {
    **{need: need for need in NEEDS},
    "mcp_servers": "mcp",
    "memory_namespaces": "memory",
}


@dataclass(frozen=True)
class Usage:
    """What attempts used of their tenant's daily budgets (`wovyr.engine.quotas`): the
    seconds they ran, the model tokens and cost their outputs or sub-steps record."""

    seconds: float = 0.0
    tokens: int = 0
    cost: float = 0.0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.seconds + other.seconds, self.tokens + other.tokens, self.cost + other.cost
        )


@dataclass(frozen=True)
class ChildStarted:
    """What an executor returns when its attempt started (or found) a child workflow."""

    execution_id: str


@dataclass(frozen=True)
class AwaitApproval:
    """What an executor returns when its attempt must wait for a person's approval (an
    `agent`'s tool call in `require_approval`): the activity waits (`ActivitySuspended`)
    until the approval is decided, then the same attempt runs again with the decision as
    the last step of `Dispatch.journal` (`{"step": "approval", **asked, approved, by,
    comment}`). `asked` says what is to be approved (shown with the wait)."""

    asked: dict[str, Any]


@dataclass(frozen=True)
class AwaitChildren:
    """What an executor returns when its attempt must wait for child workflows it started
    (an `agent`'s tool calls of `workflow:` tools): the activity waits (`ActivitySuspended`,
    `kind: children`) holding no worker, each child's end joins the activity's journal as
    that call's tool step (`ChildFinished` with its `call`), and once every one of
    `children` (call id -> child id) has, the same attempt runs again."""

    turn: int
    children: dict[str, str]


@dataclass(frozen=True)
class WorkflowTool:
    """A registered workflow offered to a model as a tool: its JSON Schema is the one of
    the workflow's inputs."""

    workflow: str
    description: str
    parameters: dict[str, Any]


class ChildTools(Protocol):
    """Registered workflows as an agent's tools (built by the worker for one attempt)."""

    def describe(self, workflow: str) -> WorkflowTool:
        """The workflow's latest registered version as a tool; `NotFound` when the tenant
        has none of that name."""
        ...

    async def start(self, workflow: str, inputs: Any, call: dict[str, Any]) -> str:
        """Start (or find: the id is derived from the activity, `call["turn"]` and
        `call["call_id"]`) the child execution of one tool call; its id. `InputError` when
        `inputs` do not fit the workflow (nothing is started)."""
        ...


class Journal(Protocol):
    """The durable sub-steps of one activity (an `agent`'s model calls and tool calls).

    `steps` are those recorded so far (kept across attempts and recoveries of the
    activity, in order); `record` appends events to the execution's log and returns once
    they are committed (it raises when the attempt is no longer the current one)."""

    @property
    def steps(self) -> tuple[dict[str, Any], ...]: ...

    async def record(self, *events: EventData) -> None: ...


class Generation(Protocol):
    """One streamed model answer of an attempt: its text pieces as they arrive (`text`,
    never blocking: they are journaled in batches), and `close` once it ended or failed,
    which returns when every piece is journaled."""

    def text(self, piece: str) -> None: ...

    async def close(self) -> None: ...


class StreamSink(Protocol):
    """The stream journal of one attempt (`wovyr.store.streams`): each generation opens with
    an attempt marker, so a reader tells a retried answer from the one before it."""

    def generation(self, turn: int) -> Generation: ...


class SecretResolver(Protocol):
    """What the worker resolves `${{ secrets.NAME }}` with at dispatch
    (`wovyr.platform.secrets.Secrets`): a secret's value, or an error naming it (never a
    value): `NotFound` when the tenant has no such secret, `KmsError` when it does not
    decrypt."""

    def resolve_secret(self, tenant: str, name: str) -> str: ...


@dataclass(frozen=True)
class StepProblem:
    """What `preflight` (or `admits`) found, at `path` inside the activity (`("with",
    "nmae")`). An `admits` problem's `hint` is the `wovyr admin tenants set` flags that
    would allow the step (`--shell`, `--allow-host localhost:11434`), or None."""

    path: tuple[str, ...]
    message: str
    hint: str | None = None


Preflight = Callable[[Any, ActivityRegistry], list[StepProblem]]
Admits = Callable[[Any, SideEffectPolicy], list[StepProblem]]


class Executor(Protocol):
    def __call__(self, step: Any, rendered: Any, dispatch: Any) -> Awaitable[Any]:
        """Run one attempt with what it is handed (`dispatch`: a
        `wovyr.activities.dispatch.Dispatch`, typed loosely so that this table imports
        none of the services it hands out); return its output (JSON-able), a
        `ChildStarted`, an `AwaitChildren` or an `AwaitApproval`, or raise
        `ActivityError` (its `type` is matched by `retry.non_retryable`)."""
        ...


@dataclass(frozen=True, kw_only=True)
class ActivityKind(Declaration):
    """A kind as it is declared (`wovyr.kinds.Declaration`: what the language and the
    decider read) and what runs it (what the worker, the checks and the views read)."""

    execute: Executor | None  # None only when the decider settles the kind itself
    preflight: Preflight | None = None  # checks a step against the loaded handlers
    side_effects: bool = False  # enforces the tenant's side-effect policy when it runs
    admits: Admits | None = None  # what a policy refuses of a step, known before it runs
    redact: Callable[[Any], Any] | None = None  # its rendered input as it may be shown
    needs: frozenset[Need] = frozenset()  # the services its attempts are handed
    needs_for: Callable[[Any], frozenset[Need]] | None = None  # of those, one attempt's
    usage: Callable[[Any], Usage] | None = None  # the model usage its output records

    def __post_init__(self) -> None:
        super().__post_init__()
        if (self.execute is None) != (self.settle != "worker"):
            raise ConfigError(
                f"activity kind {self.name!r}: a kind that runs in a worker needs `execute`; "
                "one the decider settles (settle='value' or 'wait') has none"
            )
        unknown = sorted(set(self.needs) - NEEDS)
        if unknown:
            raise ConfigError(
                f"activity kind {self.name!r}: no service is named {', '.join(unknown)}",
                hint=f"services: {', '.join(sorted(NEEDS))}",
            )

    @classmethod
    def of(cls, declared: Declaration, **runs: Any) -> ActivityKind:
        """The kind `declared` (a built-in's `wovyr.kinds.steps` declaration) with what runs
        it (`execute` and the other fields of this class, by keyword)."""
        return cls(**vars(declared.declaration), **runs)

    def needs_of(self, rendered: Any) -> frozenset[Need]:
        """The services one attempt of this kind is handed, given its rendered input."""
        if self.needs_for is None:
            return self.needs
        return self.needs & self.needs_for(rendered)


class ActivityKinds(KindTable[ActivityKind]):
    """The kinds with what runs them; registering one declares it too (`DECLARED`).
    Thread-safe: changes of both tables are serialized; reads are lock-free."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()

    def register(self, kind: ActivityKind) -> ActivityKind:
        with self._lock:
            declare(kind)
            return super().register(kind)

    def unregister(self, name: str) -> None:
        with self._lock:
            super().unregister(name)
            DECLARED.unregister(name)


KINDS = ActivityKinds()


def register_kind(kind: ActivityKind) -> ActivityKind:
    """Add `kind` to the table (idempotent for the same kind); returns it."""
    return KINDS.register(kind)
