"""Prometheus metrics, in the text exposition format, with no client library.

Counters and histograms are kept in this process; they are fed by `MetricsObserver`, a
store observer (`store.add_observer`) that looks at what each committed transaction wrote
(executions created, the events of each committed step, lease losses), so the engine and
the worker need no metrics code and every process that opens a store can count: the
server (`/metrics`) and `wovyr worker --metrics-addr`. Gauges (queue depth, timer and
schedule lag) are read from the store at scrape time (`store_gauges`).

Naming follows Prometheus conventions: the `wovyr_` prefix, base units (seconds), `_total`
counters, `_seconds` histograms. No execution id is ever a label. Series that carry
workflow names belong to a tenant: the server shows them only to that tenant's keys.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from wovyr.events import EventType, model_calls
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
_FLOW_HOLD = "flow"  # the purpose of a flow hold's timer (wovyr.engine.core.shown.FLOW_HOLD)


@dataclass(frozen=True)
class _Family:
    name: str
    kind: str  # counter | histogram | gauge
    help: str
    tenant_scoped: bool


FAMILIES = {
    f.name: f
    for f in (
        _Family(
            "wovyr_executions_started_total",
            "counter",
            "Executions started, by workflow.",
            True,
        ),
        _Family(
            "wovyr_executions_finished_total",
            "counter",
            "Executions finished, by workflow and final status.",
            True,
        ),
        _Family(
            "wovyr_activity_duration_seconds",
            "histogram",
            "Duration of one activity attempt, by workflow and outcome.",
            True,
        ),
        _Family(
            "wovyr_activity_retries_total",
            "counter",
            "Activity attempts that failed and will be retried, by workflow.",
            True,
        ),
        _Family(
            "wovyr_flow_holds_total",
            "counter",
            "Attempts held by flow control (kind: rate_limit or concurrency), by key.",
            True,
        ),
        _Family(
            "wovyr_flow_throttled_seconds_total",
            "counter",
            "Seconds attempts were told to wait by flow control, by kind and key.",
            True,
        ),
        _Family(
            "wovyr_model_tokens_total",
            "counter",
            "Tokens of model calls, by provider, model and kind (input, output, and cached:"
            " the input tokens read from the provider's prompt cache).",
            True,
        ),
        _Family(
            "wovyr_model_cost_total",
            "counter",
            "Cost of model calls in the providers' prices, by provider and model.",
            True,
        ),
        _Family(
            "wovyr_model_request_duration_seconds",
            "histogram",
            "Duration of one model call, by provider, model and outcome (ok or the error).",
            True,
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
        ),
        _Family(
            "wovyr_http_request_duration_seconds",
            "histogram",
            "HTTP request duration, by the caller's tenant, method and route template.",
            True,
        ),
    )
}
Labels = tuple[tuple[str, str], ...]


class Metrics:
    """Thread-safe counters and histograms; `render` writes the exposition text.

    Label values come from outside (workflow names a tenant chooses, the method of any
    request, authenticated or not), so each metric keeps at most `max_series` label sets per
    tenant; later ones are counted together under the label value `OTHER`, and a
    long-running server's registry stays bounded whatever its clients send."""

    def __init__(self, *, max_series: int = MAX_SERIES) -> None:
        self.max_series = max_series
        self._lock = threading.Lock()
        self._counters: dict[tuple[str, str, Labels], float] = {}
        self._histograms: dict[tuple[str, str, Labels], list[float]] = {}  # buckets + sum, n
        self._series: dict[tuple[str, str], int] = {}  # label sets kept per (name, tenant)

    def _key(self, name: str, tenant: str, labels: dict[str, str], kept: dict[Any, Any]) -> Any:
        """The series `labels` are counted in (called under the lock)."""
        key = (name, tenant, tuple(sorted(labels.items())))
        if key in kept:
            return key
        if self._series.get((name, tenant), 0) >= self.max_series:
            key = (name, tenant, tuple((k, OTHER) for k, _ in key[2]))
            if key in kept:
                return key
        self._series[(name, tenant)] = self._series.get((name, tenant), 0) + 1
        return key

    def series(self) -> int:
        """How many series are kept (every metric, every tenant)."""
        with self._lock:
            return len(self._counters) + len(self._histograms)

    def inc(self, name: str, tenant: str = "", value: float = 1.0, **labels: str) -> None:
        with self._lock:
            key = self._key(name, tenant, labels, self._counters)
            self._counters[key] = self._counters.get(key, 0.0) + value

    def observe(self, name: str, seconds: float, tenant: str = "", **labels: str) -> None:
        with self._lock:
            key = self._key(name, tenant, labels, self._histograms)
            slots = self._histograms.get(key)
            if slots is None:
                slots = self._histograms[key] = [0.0] * (len(_SECONDS_BUCKETS) + 2)
            for i, bound in enumerate(_SECONDS_BUCKETS):
                if seconds <= bound:
                    slots[i] += 1
            slots[-2] += seconds
            slots[-1] += 1

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
        with self._lock:
            return self._counters.get((name, tenant, tuple(sorted(labels.items()))), 0.0)

    def render(self, tenant: str | None, sampled: Sequence[Sample] = ()) -> str:
        """The exposition text for a caller of `tenant`: that tenant's series only (no
        process-wide series: they would tell one tenant about the others' work). None: every
        series, every tenant's (for the host's scrape key and a worker's own endpoint), and
        `sampled` values read at scrape time."""
        with self._lock:
            counters = dict(self._counters)
            histograms = {k: list(v) for k, v in self._histograms.items()}
        lines: list[str] = []
        for family in FAMILIES.values():
            lines += [f"# HELP {family.name} {family.help}", f"# TYPE {family.name} {family.kind}"]
            source: Iterable[Any] = counters if family.kind == "counter" else histograms
            for name, owner, labels in sorted(source):
                if name != family.name:
                    continue
                if tenant is not None and (not family.tenant_scoped or owner != tenant):
                    continue
                shown = (("tenant", owner), *labels) if family.tenant_scoped else labels
                if family.tenant_scoped and not owner:  # a request nobody authenticated
                    shown = labels
                if family.kind == "counter":
                    lines.append(f"{name}{_labels(shown)} {_num(counters[(name, owner, labels)])}")
                else:
                    lines += _histogram_lines(name, shown, histograms[(name, owner, labels)])
        for name, kind, help_text, value in sampled if tenant is None else ():
            lines += [
                f"# HELP {name} {help_text}",
                f"# TYPE {name} {kind}",
                f"{name} {_num(value)}",
            ]
        return "\n".join(lines) + "\n"


def _histogram_lines(name: str, labels: Labels, slots: list[float]) -> list[str]:
    out = []
    for bound, count in zip(_SECONDS_BUCKETS, slots, strict=False):
        out.append(f"{name}_bucket{_labels((*labels, ('le', _num(bound))))} {_num(count)}")
    out.append(f"{name}_bucket{_labels((*labels, ('le', '+Inf')))} {_num(slots[-1])}")
    out.append(f"{name}_sum{_labels(labels)} {_num(slots[-2])}")
    out.append(f"{name}_count{_labels(labels)} {_num(slots[-1])}")
    return out


def _labels(labels: Iterable[tuple[str, str]]) -> str:
    parts = [f'{k}="{_escape(v)}"' for k, v in labels]
    return "{" + ",".join(parts) + "}" if parts else ""


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


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
            if kind == EventType.MODEL_CALL_COMPLETED or event.get("model_calls"):
                for call in model_calls([(kind, event.data)]):  # an agent's, an llm step's
                    self._model_call(step.tenant, call)
                if kind == EventType.MODEL_CALL_COMPLETED:
                    continue
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

    def _model_call(self, tenant: str, call: dict[str, Any]) -> None:
        """One model call's tokens, cost and latency (`wovyr.events.model_calls`)."""
        labels = {"provider": str(call.get("provider") or ""), "model": str(call.get("model"))}
        for kind, key in (
            ("input", "input_tokens"),
            ("output", "output_tokens"),
            ("cached", "cached_tokens"),
        ):
            tokens = call.get(key)
            if isinstance(tokens, int) and tokens > 0:
                self.metrics.inc("wovyr_model_tokens_total", tenant, tokens, kind=kind, **labels)
        cost = call.get("cost")
        if isinstance(cost, int | float) and cost > 0:
            self.metrics.inc("wovyr_model_cost_total", tenant, float(cost), **labels)
        latency = call.get("latency")
        if isinstance(latency, int | float):
            outcome = str(call.get("error") or "ok")
            self.metrics.observe(
                "wovyr_model_request_duration_seconds", latency, tenant, outcome=outcome, **labels
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
