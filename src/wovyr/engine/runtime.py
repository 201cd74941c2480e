"""What an engine runs with: one frozen record (`Runtime`) of its store, clock, tracer,
activities, secrets, providers, credentials, listeners, caches and limits, and the tenant
and actor it acts for.

Every engine service (`wovyr.engine.starts`, `changes`, `reads`, `usage`, `flow`,
`retention_policy`, `definitions`) is a function of a runtime; the `Engine` facade holds
one. A view for another tenant or actor is `replace(runtime, tenant=...)`: the listeners
and caches are the same objects, so every view of one engine shares them. Nothing is
assigned to a runtime after it is built (`wovyr.assemble` builds the edges' runtimes from
settings).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypedDict, TypeVar, overload

from wovyr.activities.base import ActivityRegistry, default_registry
from wovyr.activities.providers import BoundCredentials, CredentialResolver, Providers
from wovyr.clock import Clock, SystemClock
from wovyr.engine.core.bounds import MAX_EXECUTION_BYTES, ValueLimits
from wovyr.engine.core.policy import MAX_RECOVERIES
from wovyr.engine.quotas import QuotaCache
from wovyr.errors import InputError, Problem
from wovyr.store import check_store
from wovyr.store.audit import AuditEntry
from wovyr.store.base import DEFAULT_TENANT, Store
from wovyr.store.capabilities import TimerLocking, capabilities
from wovyr.store.codec import (
    MAX_DEPTH,
    MAX_PAYLOAD_BYTES,
    PayloadRefused,
    check_payload,
    json_bytes,
    json_depth,
)
from wovyr.traces import NO_TRACER, Tracer

if TYPE_CHECKING:
    from wovyr.activities.kinds import SecretResolver
    from wovyr.activities.policy import SideEffectPolicy
    from wovyr.activities.sandbox import ShellSandbox
    from wovyr.definition.model import Workflow

__all__ = [
    "DEFAULT_TIMEOUT",
    "DEFINITION_CACHE",
    "SOURCE_CACHE",
    "STORED_CACHE",
    "Caches",
    "Limits",
    "Listener",
    "Listeners",
    "Lru",
    "Runtime",
    "RuntimeField",
    "RuntimeHolder",
    "RuntimeOptions",
    "new_runtime",
]

DEFAULT_TIMEOUT = 300.0  # seconds an attempt may take when its definition gives no timeout
# A long-running engine sees any number of distinct definitions (clients that start inline
# text made per request); each cache keeps the most recently used, and a miss costs a parse
# (sources), a store read (definitions) or an idempotent write (stored).
SOURCE_CACHE = 256  # source text -> parsed and hashed
DEFINITION_CACHE = 512  # content hash -> parsed (what executions run on)
STORED_CACHE = 4096  # (tenant, hash) known to be in the store

Listener = Callable[[str, str], None]  # told (tenant, execution id) of each change
_K = TypeVar("_K")
_V = TypeVar("_V")
_T = TypeVar("_T")


class Lru(Generic[_K, _V]):
    """At most `size` entries, the least recently used dropped first; thread-safe (request
    threads and the worker share an engine's caches)."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError("an LRU cache holds at least one entry")
        self.size = size
        self._entries: OrderedDict[_K, _V] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._entries

    def get(self, key: _K) -> _V | None:
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def put(self, key: _K, value: _V) -> None:
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)


@dataclass(frozen=True, eq=False)
class Caches:
    """What every view of one engine shares: definitions by content hash, (tenant, hash)
    known to be in the store, source text -> (parsed, hash), and the tenants' quotas."""

    definitions: Lru[str, Workflow] = field(default_factory=lambda: Lru(DEFINITION_CACHE))
    stored: Lru[tuple[str, str], bool] = field(default_factory=lambda: Lru(STORED_CACHE))
    sources: Lru[str, tuple[Workflow, str]] = field(default_factory=lambda: Lru(SOURCE_CACHE))
    quotas: QuotaCache = field(default_factory=QuotaCache)


class Listeners:
    """Who is told (tenant, execution id) after each change, so a local worker reacts at
    once instead of at its next poll; shared by every view of one engine."""

    def __init__(self) -> None:
        self._listeners: list[Listener] = []

    def add(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def remove(self, listener: Listener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def notify(self, tenant: str, execution_id: str) -> None:
        for listener in list(self._listeners):
            listener(tenant, execution_id)


@dataclass(frozen=True)
class Limits:
    """The bounds an engine enforces (see `RuntimeOptions` for each)."""

    max_child_depth: int = 10
    max_items: int = 10_000
    max_recoveries: int = MAX_RECOVERIES
    default_timeout: float = DEFAULT_TIMEOUT
    max_payload_bytes: int = MAX_PAYLOAD_BYTES
    max_execution_bytes: int | None = MAX_EXECUTION_BYTES
    min_schedule_interval: float = 1.0
    min_continue_interval: float = 1.0
    # what every step may store (sized as the stores encode)
    value_limits: ValueLimits = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.max_recoveries < 0:
            raise ValueError("max_recoveries must be 0 or more")
        if self.default_timeout <= 0 or self.max_payload_bytes <= 0:
            raise ValueError("default_timeout and max_payload_bytes must be positive")
        if not self.min_continue_interval >= 0:
            raise ValueError("min_continue_interval must be 0 or more")
        if self.max_execution_bytes is not None and self.max_execution_bytes <= 0:
            raise ValueError("max_execution_bytes must be positive (or None)")
        limits = ValueLimits(
            json_bytes, json_depth, self.max_payload_bytes, MAX_DEPTH, self.max_execution_bytes
        )
        object.__setattr__(self, "value_limits", limits)

    def checked(self, what: str, value: _T, path: str) -> _T:
        """`value`, if the store may keep it (size and depth caps), else `InputError`."""
        try:
            check_payload(value, what, max_bytes=self.max_payload_bytes)
        except PayloadRefused as exc:
            raise InputError([Problem(exc.message, path=path)]) from None
        except TypeError as exc:
            raise InputError([Problem(str(exc), path=path)]) from None
        return value


@dataclass(frozen=True, eq=False)
class Runtime:
    """What an engine runs with, acting for `tenant` as `actor` (None: the system's own
    changes, not audited). Built by `new_runtime` (or `wovyr.assemble` from settings)."""

    store: Store
    clock: Clock = field(default_factory=SystemClock)
    activities: ActivityRegistry = default_registry
    limits: Limits = field(default_factory=Limits)
    tracer: Tracer = NO_TRACER
    secrets: SecretResolver | None = None
    providers: Providers = field(default_factory=Providers)
    credentials: CredentialResolver = field(default_factory=BoundCredentials)
    side_effects: SideEffectPolicy | None = None
    shell_sandbox: ShellSandbox | None = None
    listeners: Listeners = field(default_factory=Listeners)
    caches: Caches = field(default_factory=Caches)
    tenant: str = DEFAULT_TENANT
    actor: str | None = None
    # the store's, asked once per runtime (not per tick)
    timer_locking: TimerLocking | None = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "timer_locking", capabilities(self.store).timer_locking)

    def view(self, tenant: str, actor: str | None) -> Runtime:
        """The same runtime acting for `tenant` as `actor` (itself when nothing changes)."""
        if tenant == self.tenant and actor == self.actor:
            return self
        return replace(self, tenant=tenant, actor=actor)

    def for_tenant(self, tenant: str) -> Runtime:
        """The same runtime acting for `tenant` (as the same actor)."""
        return self.view(tenant, self.actor)

    def notify(self, execution_id: str, tenant: str | None = None) -> None:
        """Tell the listeners that `execution_id` of `tenant` (default: this one) changed."""
        self.listeners.notify(tenant or self.tenant, execution_id)

    def audit_entry(
        self, action: str, target: str, details: Mapping[str, Any] | None = None
    ) -> AuditEntry | None:
        """The audit record of a change this runtime's actor makes now (None without an
        actor: a change the system makes itself, a worker's step, a schedule's fire, a
        child's start, is in the execution's own log, not in the audit chain). The store
        appends it in the transaction of the change (`wovyr.store.audit`)."""
        if self.actor is None:
            return None
        return AuditEntry(
            at=self.clock.now(),
            tenant=self.tenant,
            actor=self.actor,
            action=action,
            target=target,
            details=dict(details or {}),
        )


class RuntimeHolder(Protocol):
    """What holds a runtime (an engine)."""

    @property
    def runtime(self) -> Runtime: ...


class RuntimeField(Generic[_T]):
    """An attribute of a runtime's holder read from the runtime (there is nothing to
    assign: the holder is changed only by building another over another runtime)."""

    def __init__(self, read: Callable[[Runtime], _T]) -> None:
        self._read = read

    @overload
    def __get__(self, holder: None, owner: type) -> RuntimeField[_T]: ...
    @overload
    def __get__(self, holder: RuntimeHolder, owner: type | None = None) -> _T: ...
    def __get__(
        self, holder: RuntimeHolder | None, owner: type | None = None
    ) -> _T | RuntimeField[_T]:
        return self if holder is None else self._read(holder.runtime)  # on the class: itself


class RuntimeOptions(TypedDict, total=False):
    """What `Engine(store, ...)` and `new_runtime` take besides the store.

    `providers`: the model providers `llm` and `agent` activities may call (none by
    default); `credentials`: how a provider's API key is resolved from its config, in the
    worker once per attempt (never stored; by default only keys bound to the providers' own
    configs). `max_recoveries`: how often an activity (an item, a compensation) is run
    again after its attempt was lost with its worker (process killed, lease expired) before
    it fails with `RecoveryBudgetExhausted`; such re-runs never count against its
    `retry.max_attempts`. `side_effects`: one policy for what `shell` and `http` activities
    of every tenant may do; None (the default) reads each tenant's from the store
    (`wovyr.engine.tenants`: the local owner's tenant `default` is trusted, any other
    restricted until an administrator opens it). `default_timeout`: the seconds an attempt
    (an activity's or a compensation's) may take when its definition gives no `timeout`.
    `max_payload_bytes`: the largest JSON a start's inputs, a signal's payload or an
    activity's output may be (each also nests at most 64 levels deep), and so may every
    value a step records (`set` outputs, rendered inputs, a `for_each`'s outputs together:
    `wovyr.engine.core.bounds`). `max_execution_bytes`: the most one execution's checkpoint
    may hold (None: no bound); a value that would take it past fails its activity
    (`ExecutionTooLarge`). `min_schedule_interval`: the fewest seconds between two fires
    any schedule may be set to (store-wide; a tenant's `max_schedule_rate` quota may ask
    for more). `min_continue_interval`: the fewest seconds between the starts of two runs
    of one continue-as-new chain (0: none); a run that ends sooner holds its hand-over on a
    durable timer until then (`continue_hold`). `secrets`: what workers resolve
    `${{ secrets.NAME }}` with at dispatch (the edges pass `wovyr.platform.secrets.Secrets`);
    None: an attempt that references a secret fails, not retried, saying no secrets are
    configured. `tracer`: the tracing hooks (`wovyr.traces`; off by default): starts record
    their span's context, attempts open spans under it. `shell_sandbox`: what isolated
    `shell` steps do not see and whom they run as (the edges pass the worker's home and
    database; None: only the worker's processes are out of their sight). `caches`: shared
    caches (by default, new ones)."""

    clock: Clock | None
    activities: ActivityRegistry | None
    tenant: str
    actor: str | None
    max_child_depth: int
    max_items: int
    max_recoveries: int
    side_effects: SideEffectPolicy | None
    default_timeout: float
    max_payload_bytes: int
    min_schedule_interval: float
    min_continue_interval: float
    secrets: SecretResolver | None
    providers: Providers | None
    credentials: CredentialResolver | None
    tracer: Tracer | None
    shell_sandbox: ShellSandbox | None
    max_execution_bytes: int | None
    caches: Caches


_LIMITS = frozenset(f.name for f in Limits.__dataclass_fields__.values() if f.init)


def new_runtime(store: Store, **options: Any) -> Runtime:
    """A runtime over `store` with `options` (`RuntimeOptions`; None: the default). A
    partial store fails here, with what it lacks."""
    check_store(store)
    given = {k: v for k, v in options.items() if v is not None or k == "max_execution_bytes"}
    unknown = set(given) - _LIMITS - set(RuntimeOptions.__annotations__)
    if unknown:
        raise TypeError(f"unknown engine options: {', '.join(sorted(unknown))}")
    limits = Limits(**{k: v for k, v in given.items() if k in _LIMITS})
    rest = {k: v for k, v in given.items() if k not in _LIMITS}
    return Runtime(store, limits=limits, **rest)
