"""Prometheus metrics, kept and rendered by `prometheus-client`, shown per tenant.

Counters and histograms are kept in this process, in a `prometheus_client` registry of
each `Metrics`; they are fed by `MetricsObserver`, a store observer (`store.add_observer`)
that looks at what each committed transaction wrote (executions created, the events of
each committed step, lease losses), so the engine and the worker need no metrics code and
every process that opens a store can count: the server (`/metrics`) and `wovyr worker
--metrics-addr`. Gauges (queue depth, timer and schedule lag) are read from the store at
scrape time (`store_gauges`).

Naming follows Prometheus conventions: the `wovyr_` prefix, base units (seconds), `_total`
counters, `_seconds` histograms. No execution id is ever a label. Series that carry
workflow names belong to a tenant (their `tenant` label): `render(tenant)` shows a
tenant's key only its own, through a collector that filters the registry's samples.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import GaugeMetricFamily, Metric

from wovyr.events import EventType
from wovyr.store.base import (
    Claim,
    CommitOutcome,
    ExecutionRecord,
    NewExecution,
    StepWrite,
    Store,
)

__all__ = [
    "FAMILIES",
    "MAX_SERIES",
    "OTHER",
    "REMEMBER",
    "Metrics",
    "MetricsObserver",
    "Sample",
    "meter",
    "store_gauges",
]

log = logging.getLogger("wovyr.metrics")
_SECONDS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800)
_TERMINAL = {
    EventType.EXECUTION_COMPLETED: "completed",
    EventType.EXECUTION_FAILED: "failed",
    EventType.EXECUTION_CANCELLED: "cancelled",
    EventType.EXECUTION_CONTINUED: "continued",  # a run of a chain ended; the chain goes on
}
_COUNTED = {EventType.ACTIVITY_COMPLETED, EventType.ACTIVITY_FAILED, *_TERMINAL}
# Executions whose tenant/workflow (and running attempts' start times) an observer keeps,
# least recently used first out; an execution is also forgotten when it ends. About 0.4 KB
# each, so at most ~2 MB however many executions a long-running process sees. One pushed
# out costs a record read at its next counted step (a worker re-learns it at each claim).
REMEMBER = 4_096
MAX_SERIES = 1_000  # label sets per metric and tenant (Metrics)
OTHER = "_other"  # the label value of what is counted beyond them
Sample = tuple[str, str, str, float]  # a value read at scrape time: name, type, help, value
_FLOW_REASON = re.compile(r"^(rate limit|concurrency) (.+?): ")
_FLOW_HOLD = "flow"  # the purpose of a flow hold's timer (wovyr.engine.core.waits.FLOW_HOLD)
_TENANT = "tenant"


@dataclass(frozen=True)
class _Family:
    name: str
    kind: str  # counter | histogram | gauge
    help: str
    tenant_scoped: bool  # its series carry a `tenant` label first (shown only to that tenant)
    labels: tuple[str, ...] = ()  # the other labels, in the order they are shown


FAMILIES = {
    f.name: f
    for f in (
        _Family(
            "wovyr_executions_started_total",
            "counter",
            "Executions started, by workflow.",
            True,
            ("workflow",),
        ),
        _Family(
            "wovyr_executions_finished_total",
            "counter",
            "Executions finished, by workflow and final status.",
            True,
            ("status", "workflow"),
        ),
        _Family(
            "wovyr_activity_duration_seconds",
            "histogram",
            "Duration of one activity attempt, by workflow and outcome.",
            True,
            ("outcome", "workflow"),
        ),
        _Family(
            "wovyr_activity_retries_total",
            "counter",
            "Activity attempts that failed and will be retried, by workflow.",
            True,
            ("workflow",),
        ),
        _Family(
            "wovyr_flow_holds_total",
            "counter",
            "Attempts held by flow control (kind: rate_limit or concurrency), by key.",
            True,
            ("key", "kind"),
        ),
        _Family(
            "wovyr_flow_throttled_seconds_total",
            "counter",
            "Seconds attempts were told to wait by flow control, by kind and key.",
            True,
            ("key", "kind"),
        ),
        _Family(
            "wovyr_lease_losses_total",
            "counter",
            "Commits refused because another worker took the execution's lease.",
            False,
        ),
        _Family(
            "wovyr_http_requests_total",
            "counter",
            "HTTP requests, by the caller's tenant, method, route template and status code.",
            True,
            ("method", "route", "status"),
        ),
        _Family(
            "wovyr_http_request_duration_seconds",
            "histogram",
            "HTTP request duration, by the caller's tenant, method and route template.",
            True,
            ("method", "route"),
        ),
    )
}
Labels = tuple[tuple[str, str], ...]


class _Registry:
    """The counters and histograms of one tenant ("": the process-wide series and the
    requests nobody authenticated, which carry no `tenant` label), in a `prometheus_client`
    registry of their own: a tenant's scrape renders its registry alone."""

    def __init__(self, tenant: str) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.families: dict[str, Counter | Histogram] = {}
        for family in FAMILIES.values():
            if tenant and not family.tenant_scoped:
                continue
            names = ((_TENANT,) if tenant and family.tenant_scoped else ()) + family.labels
            if family.kind == "counter":  # prometheus_client adds the `_total` itself
                self.families[family.name] = Counter(
                    family.name.removesuffix("_total"), family.help, names, registry=self.registry
                )
            else:
                self.families[family.name] = Histogram(
                    family.name,
                    family.help,
                    names,
                    buckets=_SECONDS_BUCKETS,
                    registry=self.registry,
                )


class Metrics:
    """Thread-safe counters and histograms, kept by `prometheus_client` (one registry per
    tenant); `render` writes the exposition text a caller may see.

    Label values come from outside (workflow names a tenant chooses, the method of any
    request, authenticated or not), so each metric keeps at most `max_series` label sets per
    tenant; later ones are counted together under the label value `OTHER`, and a
    long-running server's registry stays bounded whatever its clients send."""

    def __init__(self, *, max_series: int = MAX_SERIES) -> None:
        self.max_series = max_series
        self._lock = threading.Lock()
        self._registries: dict[str, _Registry] = {"": _Registry("")}
        # (name, tenant, sorted labels) -> the series counted for them (read without the
        # lock: a dict read is atomic, and entries are only ever added)
        self._children: dict[tuple[str, str, Labels], Any] = {}
        self._series: dict[tuple[str, str], int] = {}  # label sets kept per (name, tenant)

    def _child(self, name: str, tenant: str, labels: dict[str, str]) -> Any:
        """The series `labels` are counted in (`OTHER` past the cap)."""
        key = (name, tenant, tuple(sorted(labels.items())))
        child = self._children.get(key)
        if child is not None:
            return child
        with self._lock:
            child = self._children.get(key)
            if child is not None:
                return child
            kept = key
            if self._series.get((name, tenant), 0) >= self.max_series:
                kept = (name, tenant, tuple((k, OTHER) for k, _ in key[2]))
                labels = dict.fromkeys(labels, OTHER)
            child = self._children.get(kept)
            if child is None:
                scoped = tenant and FAMILIES[name].tenant_scoped
                registry = self._registries.get(tenant if scoped else "")
                if registry is None:
                    registry = self._registries[tenant] = _Registry(tenant)
                metric = registry.families[name]
                shown = {_TENANT: tenant, **labels} if scoped else labels
                child = metric.labels(**shown) if shown else metric
                self._children[kept] = child
                self._series[(name, tenant)] = self._series.get((name, tenant), 0) + 1
            self._children[key] = child
            return child

    def series(self) -> int:
        """How many series are kept (every metric, every tenant)."""
        with self._lock:
            return sum(self._series.values())

    def inc(self, name: str, tenant: str = "", value: float = 1.0, **labels: str) -> None:
        self._child(name, tenant, labels).inc(value)

    def observe(self, name: str, seconds: float, tenant: str = "", **labels: str) -> None:
        self._child(name, tenant, labels).observe(seconds)

    def observe_request(
        self, method: str, route: str, status: int, seconds: float, tenant: str = ""
    ) -> None:
        """One HTTP request, counted for the caller's tenant ("": not authenticated)."""
        self.inc(
            "wovyr_http_requests_total", tenant, method=method, route=route, status=str(status)
        )
        self.observe(
            "wovyr_http_request_duration_seconds", seconds, tenant, method=method, route=route
        )

    def value(self, name: str, tenant: str = "", **labels: str) -> float:
        """A counter's value (for tests and health checks)."""
        scoped = tenant and FAMILIES[name].tenant_scoped
        registry = self._registries.get(tenant if scoped else "")
        if registry is None:
            return 0.0
        shown = {_TENANT: tenant, **labels} if scoped else labels
        return registry.registry.get_sample_value(name, shown) or 0.0

    def render(self, tenant: str | None, sampled: Sequence[Sample] = ()) -> str:
        """The exposition text for a caller of `tenant`: that tenant's series only (no
        process-wide series: they would tell one tenant about the others' work). None: every
        series, every tenant's (for the host's scrape key and a worker's own endpoint), and
        `sampled` values read at scrape time."""
        with self._lock:
            if tenant is None:
                shown = list(self._registries.values())
            else:
                shown = [self._registries[tenant]] if tenant in self._registries else []
        return generate_latest(_View(shown, sampled if tenant is None else ())).decode()


class _View:
    """What `render` shows (a collector for `generate_latest`): every family's help and
    type, in `FAMILIES` order, with the samples of the registries `shown` (the caller's
    tenant's, or all), then the `sampled` gauges. The `_created` series prometheus_client
    keeps are left out (this exposition never had them)."""

    def __init__(self, shown: list[_Registry], sampled: Sequence[Sample]) -> None:
        self._shown, self._sampled = shown, sampled

    def collect(self) -> Iterator[Metric]:
        merged = {
            name: Metric(
                name.removesuffix("_total") if family.kind == "counter" else name,
                family.help,
                family.kind,
            )
            for name, family in FAMILIES.items()
        }
        for registry in self._shown:
            for metric in registry.registry.collect():
                samples = merged[_family_name(metric)].samples
                samples.extend(s for s in metric.samples if not s.name.endswith("_created"))
        yield from merged.values()
        for name, kind, help_text, value in self._sampled:
            assert kind == "gauge", name
            yield GaugeMetricFamily(name, help_text, value=value)


def _family_name(metric: Metric) -> str:
    return metric.name if metric.name in FAMILIES else f"{metric.name}_total"


def store_gauges(store: Store, now: datetime) -> list[Sample]:
    """The gauges read from the store at scrape time: queue depth, timer and schedule lag."""
    due = store.due_timers(now, 1)
    timer_lag = (now - due[0].fire_at).total_seconds() if due else 0.0
    late = [s.next_fire_at for s in store.due_schedules(now, 1) if s.next_fire_at is not None]
    schedule_lag = max(0.0, (now - late[0]).total_seconds()) if late else 0.0
    depth = float(store.ready_count(now))
    return [
        ("wovyr_queue_depth", "gauge", "Executions ready to run and not leased.", depth),
        ("wovyr_timer_lag_seconds", "gauge", "How late the oldest due timer is.", timer_lag),
        (
            "wovyr_schedule_lag_seconds",
            "gauge",
            "How late the oldest due schedule is.",
            schedule_lag,
        ),
    ]


class MetricsObserver:
    """A store observer that counts what each committed transaction wrote.

    A committed step names only its execution (tenant and id), so the observer remembers
    each execution's workflow from its creation and its claims until it ends or is released
    (suspended executions cost nothing here), in a memory of at most `remember` executions
    (least recently used out first); a step of an
    execution it does not remember (an API call in this process on an execution another
    process started) is attributed by reading the execution's record once with
    `lookup(tenant, execution_id)`.
    """

    def __init__(
        self,
        metrics: Metrics,
        lookup: Callable[[str, str], ExecutionRecord | None] | None = None,
        *,
        remember: int = REMEMBER,
    ) -> None:
        self.metrics = metrics
        self._lookup = lookup
        self._remember_at_most = remember
        self._lock = threading.Lock()
        self._owners: OrderedDict[tuple[str, str], tuple[str, str]] = OrderedDict()
        # execution -> activity -> when its running attempt started
        self._attempts: OrderedDict[tuple[str, str], dict[str, datetime]] = OrderedDict()

    def remembered(self) -> tuple[int, int]:
        """How many executions' owners, and how many running attempts, are remembered."""
        with self._lock:
            return len(self._owners), sum(len(a) for a in self._attempts.values())

    # --- StoreObserver -------------------------------------------------------------------

    def created(self, new: NewExecution) -> None:
        self._remember(new.id, new.tenant, new.workflow)
        self.metrics.inc("wovyr_executions_started_total", new.tenant, workflow=new.workflow)
        self._observe_step(new.first_step)

    def claimed(self, claims: Sequence[Claim]) -> None:
        for c in claims:
            self._remember(c.execution_id, c.tenant, str(c.checkpoint.get("workflow", "")))

    def committed(self, steps: Sequence[StepWrite], outcomes: Sequence[CommitOutcome]) -> None:
        for step, outcome in zip(steps, outcomes, strict=False):
            if outcome is CommitOutcome.OK:
                self._observe_step(step)
                if step.release_lease:  # suspended: its next owner re-learns it at its claim
                    with self._lock:
                        self._owners.pop(step.key, None)
            elif outcome is CommitOutcome.LEASE_LOST:
                self.metrics.inc("wovyr_lease_losses_total")

    # --- attribution ---------------------------------------------------------------------

    def _remember(self, execution_id: str, tenant: str, workflow: str) -> None:
        with self._lock:
            self._owners[(tenant, execution_id)] = (tenant, workflow)
            self._owners.move_to_end((tenant, execution_id))
            while len(self._owners) > self._remember_at_most:
                self._owners.popitem(last=False)

    def _forget(self, execution_id: tuple[str, str]) -> None:
        """An execution ended: nothing more of it will be counted here."""
        with self._lock:
            self._owners.pop(execution_id, None)
            self._attempts.pop(execution_id, None)

    def _owner(self, execution_id: tuple[str, str]) -> tuple[str, str] | None:
        with self._lock:
            owner = self._owners.get(execution_id)
        if owner is not None or self._lookup is None:
            return owner
        try:
            record = self._lookup(*execution_id)
        except Exception as exc:  # a step that cannot be attributed is not counted
            log.warning("metrics: cannot read execution %s: %s", execution_id, exc)
            return None
        if record is None:
            return None
        self._remember(record.id, record.tenant, record.workflow)
        return record.tenant, record.workflow

    def _observe_step(self, step: StepWrite) -> None:
        execution_id = step.key
        owner: tuple[str, str] | None = None  # looked up at the first event that counts:
        for event in step.events:  # a timer fire or a signal costs no read
            kind = event.type
            if kind == EventType.TIMER_ARMED and event.get("purpose") == _FLOW_HOLD:
                self._flow_held(step, event)
                continue
            if kind == EventType.ACTIVITY_STARTED:
                self._attempt_started(execution_id, str(event.get("activity")), event.at)
                continue
            if kind not in _COUNTED:
                continue
            owner = owner or self._owner(execution_id)
            if owner is None:
                return
            tenant, workflow = owner
            if kind in _TERMINAL:
                self.metrics.inc(
                    "wovyr_executions_finished_total",
                    tenant,
                    workflow=workflow,
                    status=_TERMINAL[kind],
                )
                self._forget(execution_id)
                continue
            retry = kind == EventType.ACTIVITY_FAILED and bool(event.get("will_retry"))
            if retry:
                self.metrics.inc("wovyr_activity_retries_total", tenant, workflow=workflow)
            began = self._attempt_ended(execution_id, str(event.get("activity")))
            if began is not None:
                outcome = "completed" if kind == EventType.ACTIVITY_COMPLETED else "failed"
                self.metrics.observe(
                    "wovyr_activity_duration_seconds",
                    max(0.0, (event.at - began).total_seconds()),
                    tenant,
                    workflow=workflow,
                    outcome="retried" if retry else outcome,
                )

    def _flow_held(self, step: StepWrite, event: Any) -> None:
        """A flow hold: its kind and key are in its reason ("rate limit KEY: ...",
        "concurrency KEY: ..."), its wait is until it fires."""
        found = _FLOW_REASON.match(str(event.get("reason") or ""))
        if found is None:
            return
        kind = "rate_limit" if found[1] == "rate limit" else "concurrency"
        key = str(found[2])
        self.metrics.inc("wovyr_flow_holds_total", step.tenant, kind=kind, key=key)
        wait = (datetime.fromisoformat(str(event.get("fire_at"))) - event.at).total_seconds()
        seconds = max(0.0, wait)
        self.metrics.inc(
            "wovyr_flow_throttled_seconds_total", step.tenant, seconds, kind=kind, key=key
        )

    def _attempt_started(self, execution_id: tuple[str, str], activity: str, at: datetime) -> None:
        with self._lock:
            running = self._attempts.get(execution_id)
            if running is None:
                running = self._attempts[execution_id] = {}
            else:
                self._attempts.move_to_end(execution_id)
            running[activity] = at
            while len(self._attempts) > self._remember_at_most:
                self._attempts.popitem(last=False)

    def _attempt_ended(self, execution_id: tuple[str, str], activity: str) -> datetime | None:
        with self._lock:
            running = self._attempts.get(execution_id)
            if running is None:
                return None
            began = running.pop(activity, None)
            if not running:
                del self._attempts[execution_id]
            return began


def meter(store: Store) -> Metrics:
    """A new registry, fed from now on by everything `store` commits in this process."""
    metrics = Metrics()
    store.add_observer(
        MetricsObserver(metrics, lambda tenant, execution_id: store.load(execution_id, tenant))
    )
    return metrics
