"""What an activity handler sees and how it reports failure.

A `tool` handler is a Python callable registered with `@wovyr.activity("name")`. It is
called with the rendered `with:` mapping as keyword arguments, plus `ctx` when it declares a
parameter of that name. Sync handlers run in a thread pool; async ones on the event loop.
Activities are at-least-once: use `ctx.idempotency_key` (stable per attempt) or
`ctx.activity_key` (stable across attempts) to make side effects idempotent.
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib
import importlib.util
import inspect
import sys
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, TypeVar

from wovyr.errors import ActivityNotRegistered, ConfigError

__all__ = [
    "ActivityContext",
    "ActivityError",
    "ActivityRegistry",
    "NonRetryableError",
    "activity",
    "current_activity",
    "default_registry",
    "load_activity_modules",
]

Handler = Callable[..., Any] | Callable[..., Awaitable[Any]]
F = TypeVar("F", bound=Callable[..., Any])
ENTRY_POINT_GROUP = "wovyr.activities"


@dataclass(frozen=True)
class ActivityContext:
    """Facts about the running attempt, passed to handlers as `ctx`."""

    execution_id: str
    activity_id: str
    attempt: int
    workflow: str
    idempotency_key: str  # <execution>/<activity>/<attempt>: unique per attempt
    heartbeat: Callable[[], None] = field(default=lambda: None, repr=False, compare=False)

    @property
    def activity_key(self) -> str:
        """Stable across attempts of the same activity: `<execution>/<activity>`."""
        return f"{self.execution_id}/{self.activity_id}"


_current: contextvars.ContextVar[ActivityContext | None] = contextvars.ContextVar(
    "wovyr_activity", default=None
)


def current_activity() -> ActivityContext:
    """The context of the activity attempt running in this task or thread."""
    ctx = _current.get()
    if ctx is None:
        raise RuntimeError("current_activity() called outside an activity")
    return ctx


class ActivityError(Exception):
    """An activity attempt failed; `type` is matched against `retry.non_retryable`."""

    def __init__(
        self,
        message: str,
        *,
        type: str | None = None,
        retryable: bool = True,
        details: Any = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.type = type or self.__class__.__name__
        self.retryable = retryable
        self.details = details


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
    """Run `handler` with its context bound; sync handlers go to a worker thread."""
    import asyncio

    args = dict(kwargs)
    if _wants_ctx(handler):
        args["ctx"] = ctx
    token = _current.set(ctx)
    try:
        if inspect.iscoroutinefunction(handler):
            return await handler(**args)
        return await asyncio.to_thread(handler, **args)
    finally:
        _current.reset(token)


_WANTS_CTX: dict[Any, bool] = {}


def _wants_ctx(handler: Handler) -> bool:
    """Whether `handler` declares a `ctx` parameter (cached: signature() is slow)."""
    try:
        return _WANTS_CTX[handler]
    except (KeyError, TypeError):
        wants = "ctx" in inspect.signature(handler).parameters
        with contextlib.suppress(TypeError):  # an unhashable callable: just don't cache
            _WANTS_CTX[handler] = wants
        return wants


def load_activity_modules(specs: Iterable[str], *, entry_point_group: str | None = None) -> None:
    """Import modules (dotted names or .py paths) so their `@activity` decorators run."""
    for spec in specs:
        for item in (s.strip() for s in spec.split(",")):
            if item:
                _import_one(item)
    if entry_point_group:
        for ep in entry_points(group=entry_point_group):
            try:
                ep.load()
            except Exception as exc:  # a broken plugin must not hide the others' errors
                raise ConfigError(f"cannot load activities entry point {ep.name!r}: {exc}") from exc


def _import_one(item: str) -> None:
    try:
        if item.endswith(".py") or "/" in item:
            path = Path(item).resolve()
            if not path.is_file():
                raise ConfigError(f"activities file not found: {item}")
            name = f"wovyr_user_{path.stem}_{abs(hash(str(path)))}"
            if name in sys.modules:
                return
            spec = importlib.util.spec_from_file_location(name, path)
            if spec is None or spec.loader is None:
                raise ConfigError(f"cannot import activities file {item}")
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        else:
            if str(Path.cwd()) not in sys.path:
                sys.path.insert(0, str(Path.cwd()))
            importlib.import_module(item)
    except ConfigError:
        raise
    except Exception as exc:
        raise ConfigError(f"cannot import activities module {item!r}: {exc}") from exc
