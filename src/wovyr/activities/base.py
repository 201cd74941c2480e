"""What an activity handler sees and how it reports failure.

A `tool` handler is a Python callable registered with `@wovyr.activity("name")`. It is
called with the rendered `with:` mapping as keyword arguments, plus `ctx` when it declares a
parameter of that name; keys that do not fit its signature fail the attempt before it is
called, as `InvalidActivityInput` (not retried: see `bind_inputs`). Sync handlers run in a
thread pool; async ones on the event loop. Activities are at-least-once: use
`ctx.idempotency_key` (stable per attempt) or `ctx.activity_key` (stable across attempts) to
make side effects idempotent.
"""

from __future__ import annotations

import contextlib
import contextvars
import difflib
import hashlib
import importlib
import importlib.util
import inspect
import sys
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from wovyr.activities.logs import AttemptLog, capture
from wovyr.errors import ActivityNotRegistered, ConfigError, WovyrError
from wovyr.ids import DEFAULT_TENANT

__all__ = [
    "ActivityContext",
    "ActivityError",
    "ActivityRegistry",
    "InputProblem",
    "NonRetryableError",
    "Parameters",
    "activity",
    "bind_inputs",
    "current_activity",
    "default_registry",
    "load_activity_modules",
    "parameters_of",
]

Handler = Callable[..., Any] | Callable[..., Awaitable[Any]]
F = TypeVar("F", bound=Callable[..., Any])
ENTRY_POINT_GROUP = "wovyr.activities"


def key_scope(tenant: str) -> str:
    """What makes an attempt's keys unique across tenants, which share no id space: nothing
    for tenant `default` (its keys read `<execution>/<activity>/<attempt>`, as they always
    have), else `<tenant>@` (neither ids nor tenant names may contain `@`), so two tenants
    that use the same execution id never hand an outside system the same key."""
    return "" if tenant == DEFAULT_TENANT else f"{tenant}@"


@dataclass(frozen=True)
class ActivityContext:
    """Facts about the running attempt, passed to handlers as `ctx`."""

    execution_id: str
    activity_id: str
    attempt: int
    workflow: str
    # [<tenant>@]<execution>/<activity>/<attempt>: unique per attempt (see `key_scope`)
    idempotency_key: str
    heartbeat: Callable[[], None] = field(default=lambda: None, repr=False, compare=False)
    # `ctx.log.info(...)`: lines kept with the attempt (shown by `wovyr workflows logs`)
    log: AttemptLog = field(default_factory=AttemptLog, repr=False, compare=False)
    # whose execution it is (ids are per tenant: the same id may exist in several)
    tenant: str = "default"
    # The W3C trace context of this attempt's span when tracing is on (None when off):
    # pass it on to the services the handler calls (`trace_headers`) to continue the trace.
    traceparent: str | None = None
    tracestate: str | None = None

    @property
    def activity_key(self) -> str:
        """Stable across attempts of the same activity: `[<tenant>@]<execution>/<activity>`."""
        return f"{key_scope(self.tenant)}{self.execution_id}/{self.activity_id}"

    @property
    def trace_headers(self) -> dict[str, str]:
        """The W3C headers (`traceparent`, `tracestate`) that continue this attempt's
        trace in a request the handler sends; empty when tracing is off."""
        headers: dict[str, str] = {}
        if self.traceparent:
            headers["traceparent"] = self.traceparent
            if self.tracestate:
                headers["tracestate"] = self.tracestate
        return headers


_current: contextvars.ContextVar[ActivityContext | None] = contextvars.ContextVar(
    "wovyr_activity", default=None
)


def current_activity() -> ActivityContext:
    """The context of the activity attempt running in this task or thread."""
    ctx = _current.get()
    if ctx is None:
        raise RuntimeError("current_activity() called outside an activity")
    return ctx


class ActivityError(WovyrError):
    """An activity attempt failed; `type` is matched against `retry.non_retryable`."""

    def __init__(
        self,
        message: str,
        *,
        type: str | None = None,
        retryable: bool = True,
        details: Any = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.type = type or self.__class__.__name__
        self.retryable = retryable
        self.details = details
        # seconds the next attempt must wait (a server's `Retry-After`): the retry timer is
        # armed for this delay instead of the policy's back-off
        self.retry_after = retry_after


class NonRetryableError(ActivityError):
    """Raise from a handler to fail the activity without further attempts."""

    def __init__(self, message: str, *, type: str | None = None, details: Any = None) -> None:
        super().__init__(
            message, type=type or "NonRetryableError", retryable=False, details=details
        )


class ActivityRegistry:
    """Maps tool names to handlers."""

    def __init__(self) -> None:
        self._handlers: dict[str, Handler] = {}

    def register(self, name: str, handler: Handler) -> None:
        self._handlers[name] = handler

    def activity(self, name: str) -> Callable[[F], F]:
        def deco(fn: F) -> F:
            self.register(name, fn)
            with contextlib.suppress(AttributeError, TypeError):  # what a code workflow runs
                fn.__wovyr_activity__ = name  # type: ignore[attr-defined]
            return fn

        return deco

    def get(self, name: str) -> Handler:
        try:
            return self._handlers[name]
        except KeyError:
            known = ", ".join(sorted(self._handlers)) or "none"
            raise ActivityNotRegistered(
                f"no activity handler is registered as {name!r}",
                hint=f"registered: {known}; load modules with --activities MODULE",
            ) from None

    def names(self) -> list[str]:
        return sorted(self._handlers)

    def __contains__(self, name: object) -> bool:
        return name in self._handlers

    def merged(self, other: ActivityRegistry) -> ActivityRegistry:
        out = ActivityRegistry()
        out._handlers = {**self._handlers, **other._handlers}
        return out


default_registry = ActivityRegistry()


def activity(name: str) -> Callable[[F], F]:
    """Register a Python callable as the tool `name` (in the default registry)."""
    return default_registry.activity(name)


async def call_handler(handler: Handler, kwargs: dict[str, Any], ctx: ActivityContext) -> Any:
    """Run `handler` with its context bound; sync handlers go to a worker thread. The
    arguments must fit its signature (`bind_inputs` checks them first)."""
    import asyncio

    args = dict(kwargs)
    if parameters_of(handler).wants_ctx:
        args["ctx"] = ctx
    token = _current.set(ctx)
    try:
        # what the handler's module logs during the attempt is kept with it too
        with capture(getattr(handler, "__module__", None) or "__main__"):
            if inspect.iscoroutinefunction(handler):
                return await handler(**args)
            return await asyncio.to_thread(handler, **args)
    finally:
        _current.reset(token)


@dataclass(frozen=True)
class InputProblem:
    """One `with:` key a handler cannot take, or one input it needs and did not get."""

    key: str
    message: str
    unknown: bool  # True: a key given that no parameter takes; False: a missing input


@dataclass(frozen=True)
class Parameters:
    """The keyword arguments a handler takes, read once from its signature.

    Checking `with:` keys against it has the semantics of `inspect.Signature.bind(**kw)`
    (plus `ctx`, which Wovyr passes itself), answered with the names a user wrote."""

    names: tuple[str, ...]  # taken by keyword, in order (`ctx` left out: it is Wovyr's)
    required: tuple[str, ...]  # of those, the ones without a default
    any_keyword: bool  # a `**kwargs` takes any other key
    wants_ctx: bool
    readable: bool = True  # False when the signature cannot be read: nothing is checked

    def describe(self) -> str:
        """`name, greeting (optional)`: what the handler expects."""
        shown = [n if n in self.required else f"{n} (optional)" for n in self.names]
        if self.any_keyword:
            shown.append("any other key (**kwargs)")
        return ", ".join(shown) or "no inputs"

    def problems(self, tool: str, keys: Iterable[str]) -> list[InputProblem]:
        """What is wrong with calling the tool with these `with:` keys (none when it fits)."""
        if not self.readable:
            return []
        given = list(keys)
        out: list[InputProblem] = []
        for key in given:
            if key == "ctx" and self.wants_ctx:
                message = f"input 'ctx' of tool {tool!r} is reserved for the activity context"
                out.append(InputProblem(key, message, unknown=True))
            elif key not in self.names and not self.any_keyword:
                message = f"tool {tool!r} takes no input {key!r}"
                close = difflib.get_close_matches(key, [n for n in self.names if n not in given])
                if close:
                    message += f" (did you mean {close[0]!r}?)"
                out.append(InputProblem(key, message, unknown=True))
        for name in self.required:
            if name not in given:
                message = f"tool {tool!r} needs input {name!r}"
                out.append(InputProblem(name, message, unknown=False))
        return out


def parameters_of(handler: Handler) -> Parameters:
    """The parameters of `handler` (cached per handler: `inspect.signature` is slow)."""
    try:
        return _PARAMETERS[handler]
    except (KeyError, TypeError):
        found = _read_parameters(handler)
        with contextlib.suppress(TypeError):  # an unhashable callable: just don't cache
            _PARAMETERS[handler] = found
        return found


_PARAMETERS: dict[Any, Parameters] = {}
_BY_KEYWORD = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


def _read_parameters(handler: Handler) -> Parameters:
    try:
        signature = inspect.signature(handler)
    except (TypeError, ValueError):  # some builtins: called as they are, unchecked
        return Parameters((), (), any_keyword=True, wants_ctx=False, readable=False)
    params = signature.parameters
    wants_ctx = "ctx" in params
    names, required = [], []
    for name, param in params.items():
        if name == "ctx" and wants_ctx:
            continue
        empty = param.default is inspect.Parameter.empty
        if param.kind in _BY_KEYWORD:
            names.append(name)
            if empty:
                required.append(name)
        elif param.kind is inspect.Parameter.POSITIONAL_ONLY and empty:
            required.append(name)  # can never be given by keyword: the call always fails
    any_keyword = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    return Parameters(tuple(names), tuple(required), any_keyword, wants_ctx)


def bind_inputs(tool: str, handler: Handler, kwargs: dict[str, Any]) -> None:
    """Refuse inputs that do not fit the handler's signature, before it is called: a
    `NonRetryableError` of type `InvalidActivityInput` naming each key (another attempt
    with the same inputs would fail the same way)."""
    params = parameters_of(handler)
    problems = params.problems(tool, kwargs)
    if not problems:
        return
    message = "; ".join(p.message for p in problems) + f"; it takes: {params.describe()}"
    details = {
        "tool": tool,
        "unknown": [p.key for p in problems if p.unknown],
        "missing": [p.key for p in problems if not p.unknown],
        "parameters": list(params.names),
    }
    raise NonRetryableError(message, type="InvalidActivityInput", details=details)


def load_activity_modules(
    specs: Iterable[str], *, entry_point_group: str | None = None
) -> list[str]:
    """Import modules (dotted names or .py paths) so their `@activity` decorators run; the
    names of the modules they are (imported now or before), entry points' included."""
    names = []
    for spec in specs:
        for item in (s.strip() for s in spec.split(",")):
            if item:
                names.append(_import_one(item))
    if entry_point_group:
        from importlib.metadata import entry_points  # scans site-packages: only when asked

        for ep in entry_points(group=entry_point_group):
            try:
                loaded = ep.load()
            except Exception as exc:  # a broken plugin must not hide the others' errors
                raise ConfigError(f"cannot load activities entry point {ep.name!r}: {exc}") from exc
            names.append(getattr(loaded, "__name__", ep.module))
    return names


def _import_one(item: str) -> str:
    """Import one module (a dotted name or a .py path); its name in `sys.modules`."""
    try:
        if item.endswith(".py") or "/" in item:
            path = Path(item).resolve()
            if not path.is_file():
                raise ConfigError(f"activities file not found: {item}")
            # the same name in every process (str hashes are salted per process): what a
            # module registers under its name (a workflow function's) must not change
            digest = hashlib.sha256(str(path).encode()).hexdigest()[:16]
            name = f"wovyr_user_{path.stem}_{digest}"
            if name in sys.modules:
                return name
            spec = importlib.util.spec_from_file_location(name, path)
            if spec is None or spec.loader is None:
                raise ConfigError(f"cannot import activities file {item}")
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
            return name
        if str(Path.cwd()) not in sys.path:
            sys.path.insert(0, str(Path.cwd()))
        return importlib.import_module(item).__name__
    except ConfigError:
        raise
    except Exception as exc:
        raise ConfigError(f"cannot import activities module {item!r}: {exc}") from exc
