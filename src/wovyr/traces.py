"""The tracing hooks: what the engine and the workers call at fixed points, with nothing
to do when tracing is off.

An execution's trace context is data, not process state: its start records the W3C trace
context of a span (`ExecutionStarted.trace`, `{"traceparent": ..., "tracestate": ...}`),
the fold keeps it in the checkpoint, and every attempt's span is opened as a child of it
by whichever worker runs the attempt, on whatever machine, after any crash. A child
execution's start records the span of the attempt that started it, so a tree of
executions is one trace:

    start (ExecutionStarted.trace) -> attempt spans -> child start -> its attempt spans

Inside an attempt, an outside call the attempt makes (a model provider's chat or
embeddings, an MCP tool) is a span of its own, a child of the attempt's: the traced
attempt span is the task's current one while the attempt runs (`entered`), and
`call_span` opens a child of it, or answers `NO_CALL_SPAN` when there is none (tracing
off, or a call made outside an attempt: a CLI command's embedding).

`NO_TRACER` (the default everywhere) answers every hook with nothing at the cost of a
method call; the OpenTelemetry implementation is `wovyr.platform.tracing.OtelTracer`
(the only module that imports `opentelemetry`), built by the edges when tracing is on.
"""

from __future__ import annotations

import contextvars
import re
import threading
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, Final, Protocol, Self, TypedDict, Unpack

__all__ = [
    "NO_CALL_SPAN",
    "NO_SPAN",
    "NO_TRACER",
    "AttemptOf",
    "AttemptSpan",
    "Attribute",
    "CallSpan",
    "ExecutionStart",
    "LazyTracer",
    "NoTracer",
    "TraceContext",
    "Tracer",
    "call_span",
    "current_ids",
    "entered",
    "left",
    "trace_context",
]

#: The W3C trace context of a span: `traceparent` always, `tracestate` when it has one.
TraceContext = Mapping[str, str]
#: A span attribute's value (a tuple: an array of texts, e.g. finish reasons).
Attribute = str | int | float | bool | tuple[str, ...]

# version 00: trace id (32 hex, not all zeros), parent id (16 hex, not all zeros), flags
_TRACEPARENT = re.compile(r"00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}")
_MAX_TRACESTATE = 512  # the W3C limit is 32 members; a longer value is dropped, not cut


def trace_context(headers: Mapping[str, str]) -> dict[str, str] | None:
    """The trace context named by W3C headers from outside (an API request's), or None
    when there is none or its `traceparent` is not a valid version-00 one (a malformed
    context starts a new trace, as the W3C recommends). Header names are matched without
    regard to case."""
    found = {k.lower(): v for k, v in headers.items() if k.lower() in ("traceparent", "tracestate")}
    parent = found.get("traceparent", "").strip()
    if not _TRACEPARENT.fullmatch(parent):
        return None
    context = {"traceparent": parent}
    state = found.get("tracestate", "").strip()
    if state and len(state) <= _MAX_TRACESTATE and state.isprintable():
        context["tracestate"] = state
    return context


class ExecutionStart(TypedDict):
    """What `Tracer.execution_started` is told of the execution (its keywords)."""

    tenant: str
    execution_id: str
    workflow: str
    version: str


class AttemptOf(TypedDict):
    """What `Tracer.attempt` is told of the attempt (its keywords)."""

    tenant: str
    execution_id: str
    workflow: str
    activity: str
    attempt: int
    kind: str
    index: int | None
    compensation: bool


class _Ended(Protocol):
    """A span is a context manager; an exception leaving it ends it as an error."""

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


class CallSpan(_Ended, Protocol):
    """The span of one outside call an attempt makes (a context manager: ended when the
    call returns; an exception leaving it ends it as an error, named by its type only,
    never by its message, which may quote what was sent)."""

    def record(self, attributes: Mapping[str, Attribute | None]) -> None:
        """Add what became known during the call (tokens, the model that answered); None
        values are left out."""
        ...

    def failed(self, error_type: str) -> None:
        """The call answered, but with an error (an MCP tool's `isError`)."""
        ...

    def __enter__(self) -> CallSpan: ...


class AttemptSpan(_Ended, Protocol):
    """The span of one running attempt (a context manager: entered while the attempt
    runs, ended when it leaves; an exception ends it as an error)."""

    @property
    def context(self) -> TraceContext | None:
        """The span's W3C trace context (None when not traced): handed to the attempt's
        handler (`ActivityContext.traceparent`), sent by `http`, recorded by a child."""
        ...

    def outcome(self, error: Mapping[str, Any] | None, *, status: str = "completed") -> None:
        """Say how the attempt ended (`error`: its structured error, None on success;
        `status`: what it led to, e.g. `completed`, `failed`, `child`, `suspended`)."""
        ...

    def call(self, name: str, attributes: Mapping[str, Attribute]) -> CallSpan:
        """The span of an outside call the attempt makes, a child of this one."""
        ...

    def __enter__(self) -> AttemptSpan: ...


class Tracer(Protocol):
    """The hooks, called by the engine (starts) and the runner (attempts)."""

    def execution_started(
        self, parent: TraceContext | None, **start: Unpack[ExecutionStart]
    ) -> dict[str, str] | None:
        """Record the start of an execution, under `parent` (the starting attempt's span
        for a child, the caller's context for a start, None for a new trace); the trace
        context to store with it, or None when not traced."""
        ...

    def attempt(self, parent: TraceContext | None, **of: Unpack[AttemptOf]) -> AttemptSpan:
        """The span of one attempt, a child of the execution's stored context `parent`
        (None: the execution started untraced, and the attempt's span is a root)."""
        ...

    def close(self) -> None:
        """Export what is buffered and stop (the engine's `close` calls it)."""
        ...


class _Nothing:
    """A span when tracing is off: a context manager that does nothing."""

    __slots__ = ()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


class _NoCallSpan(_Nothing):
    """The call span when tracing is off (one shared instance)."""

    __slots__ = ()

    def record(self, attributes: Mapping[str, Attribute | None]) -> None:
        return None

    def failed(self, error_type: str) -> None:
        return None


NO_CALL_SPAN: Final = _NoCallSpan()


class _NoSpan(_Nothing):
    """The attempt span when tracing is off (one shared instance)."""

    __slots__ = ()

    @property
    def context(self) -> TraceContext | None:
        return None

    def outcome(self, error: Mapping[str, Any] | None, *, status: str = "completed") -> None:
        return None

    def call(self, name: str, attributes: Mapping[str, Attribute]) -> CallSpan:
        return NO_CALL_SPAN


NO_SPAN: Final = _NoSpan()

# The traced attempt span running in this task (None: tracing off, or no attempt here).
_current: contextvars.ContextVar[AttemptSpan | None] = contextvars.ContextVar(
    "wovyr_attempt_span", default=None
)


def entered(span: AttemptSpan | None) -> contextvars.Token[AttemptSpan | None]:
    """Make `span` the task's current attempt span (a traced span's `__enter__` does;
    `__exit__` hands the token back to `_current.reset`, through `left`)."""
    return _current.set(span)


def left(token: contextvars.Token[AttemptSpan | None]) -> None:
    _current.reset(token)


def current_ids() -> tuple[str, str] | None:
    """(trace id, span id) of the traced attempt running in this task, for its log lines;
    None when tracing is off or no attempt runs here."""
    attempt = _current.get()
    context = attempt.context if attempt is not None else None
    parent = context.get("traceparent", "") if context else ""
    if not _TRACEPARENT.fullmatch(parent):
        return None
    _, trace_id, span_id, _ = parent.split("-")
    return trace_id, span_id


def call_span(name: str, attributes: Mapping[str, Attribute]) -> CallSpan:
    """The span of an outside call, a child of the current attempt's span: `NO_CALL_SPAN`
    (nothing opened, nothing exported) when tracing is off or no attempt runs here. Never
    put a credential or a prompt in `attributes`."""
    attempt = _current.get()
    if attempt is None:
        return NO_CALL_SPAN
    return attempt.call(name, attributes)


class NoTracer:
    """Tracing off: no span, no context, nothing imported."""

    __slots__ = ()

    def execution_started(
        self, parent: TraceContext | None, **start: Unpack[ExecutionStart]
    ) -> dict[str, str] | None:
        return None

    def attempt(self, parent: TraceContext | None, **of: Unpack[AttemptOf]) -> AttemptSpan:
        return NO_SPAN

    def close(self) -> None:
        return None


NO_TRACER: Final = NoTracer()


class LazyTracer:
    """A tracer built on its first hook call (`build`, once, thread-safe): a process that
    has tracing on but starts nothing (a CLI command that reads) never imports the
    tracing library; `close` closes it only if it was built."""

    def __init__(self, build: Callable[[], Tracer]) -> None:
        self._build = build
        self._built: Tracer | None = None
        self._lock = threading.Lock()

    def _tracer(self) -> Tracer:
        built = self._built
        if built is None:
            with self._lock:
                if self._built is None:
                    self._built = self._build()
                built = self._built
        return built

    def execution_started(
        self, parent: TraceContext | None, **start: Unpack[ExecutionStart]
    ) -> dict[str, str] | None:
        return self._tracer().execution_started(parent, **start)

    def attempt(self, parent: TraceContext | None, **of: Unpack[AttemptOf]) -> AttemptSpan:
        return self._tracer().attempt(parent, **of)

    def close(self) -> None:
        with self._lock:
            built, self._built = self._built, None
        if built is not None:
            built.close()
