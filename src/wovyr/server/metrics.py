"""Prometheus metrics, in the text exposition format, with no client library.

Counters and histograms are kept in this process; they are fed by `MeteredStore`, a thin
wrapper around the engine's store that looks at what passes through it (executions
created, the events of each committed step, lease losses), so the engine needs no metrics
code. Gauges (queue depth, timer and schedule lag) are read from the store at scrape time.

Naming follows Prometheus conventions: the `wovyr_` prefix, base units (seconds), `_total`
counters, `_seconds` histograms. No execution id is ever a label. Series that carry
workflow names belong to a tenant and are shown only to that tenant's keys.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from wovyr.events import EventType
from wovyr.store.base import Claim, CommitOutcome, ExecutionRecord, NewExecution, StepWrite

__all__ = ["MeteredStore", "Metrics"]

_SECONDS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800)
_TERMINAL = {
    EventType.EXECUTION_COMPLETED: "completed",
    EventType.EXECUTION_FAILED: "failed",
    EventType.EXECUTION_CANCELLED: "cancelled",
}
_REMEMBER = 100_000  # executions whose tenant/workflow we keep, and activity starts
_SUBCLASSES: dict[type, type[MeteredStore]] = {}


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
            "wovyr_lease_losses_total",
            "counter",
            "Commits refused because another worker took the execution's lease.",
            False,
        ),
        _Family(
            "wovyr_http_requests_total",
            "counter",
            "HTTP requests, by method, route template and status code.",
            False,
        ),
        _Family(
            "wovyr_http_request_duration_seconds",
            "histogram",
            "HTTP request duration, by method and route template.",
            False,
        ),
    )
}
Labels = tuple[tuple[str, str], ...]


class Metrics:
    """Thread-safe counters and histograms; `render` writes the exposition text."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counters: dict[tuple[str, str, Labels], float] = {}
        self._histograms: dict[tuple[str, str, Labels], list[float]] = {}  # buckets + sum, n

    def inc(self, name: str, tenant: str = "", value: float = 1.0, **labels: str) -> None:
        key = (name, tenant, tuple(sorted(labels.items())))
        with self._lock:
            self._counters[key] = self._counters.get(key, 0.0) + value

    def observe(self, name: str, seconds: float, tenant: str = "", **labels: str) -> None:
        key = (name, tenant, tuple(sorted(labels.items())))
        with self._lock:
            slots = self._histograms.get(key)
            if slots is None:
                slots = self._histograms[key] = [0.0] * (len(_SECONDS_BUCKETS) + 2)
            for i, bound in enumerate(_SECONDS_BUCKETS):
                if seconds <= bound:
                    slots[i] += 1
            slots[-2] += seconds
            slots[-1] += 1

    def observe_request(self, method: str, route: str, status: int, seconds: float) -> None:
        self.inc("wovyr_http_requests_total", method=method, route=route, status=str(status))
        self.observe("wovyr_http_request_duration_seconds", seconds, method=method, route=route)

    def value(self, name: str, tenant: str = "", **labels: str) -> float:
        """A counter's value (for tests and health checks)."""
        with self._lock:
            return self._counters.get((name, tenant, tuple(sorted(labels.items()))), 0.0)

    def render(self, tenant: str, sampled: Sequence[tuple[str, str, str, float]] = ()) -> str:
        """The exposition text for a caller of `tenant`: global series, that tenant's
        series, and `sampled` values read at scrape time, as (name, type, help, value)."""
        with self._lock:
            counters = dict(self._counters)
            histograms = {k: list(v) for k, v in self._histograms.items()}
        lines: list[str] = []
        for family in FAMILIES.values():
            lines += [f"# HELP {family.name} {family.help}", f"# TYPE {family.name} {family.kind}"]
            source: Iterable[Any] = counters if family.kind == "counter" else histograms
            for name, owner, labels in sorted(source):
                if name != family.name or (family.tenant_scoped and owner != tenant):
                    continue
                shown = (("tenant", owner), *labels) if family.tenant_scoped else labels
                if family.kind == "counter":
                    lines.append(f"{name}{_labels(shown)} {_num(counters[(name, owner, labels)])}")
                else:
                    lines += _histogram_lines(name, shown, histograms[(name, owner, labels)])
        for name, kind, help_text, value in sampled:
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


def _forward(name: str) -> Callable[..., Any]:
    def method(self: MeteredStore, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.inner, name)(*args, **kwargs)

    method.__name__ = name
    return method


class MeteredStore:
    """Wraps a store: every call passes through unchanged; a few are also counted.

    It remembers which tenant and workflow each execution it has seen belongs to (from
    creations, claims and loads, a bounded memory) so a committed step can be attributed.
    """

    @classmethod
    def wrap(cls, inner: Any, metrics: Metrics) -> MeteredStore:
        """A wrapper whose class also declares every public method of `inner`'s class, so
        capability checks that look at the class (`isinstance` on a runtime Protocol, which
        uses static lookup from Python 3.12) still see what the store can do."""
        kind = type(inner)
        sub = _SUBCLASSES.get(kind)
        if sub is None:
            names = [
                n
                for n in dir(kind)
                if not n.startswith("_") and callable(getattr(kind, n)) and not hasattr(cls, n)
            ]
            sub = type(f"Metered{kind.__name__}", (cls,), {n: _forward(n) for n in names})
            _SUBCLASSES[kind] = sub
        return sub(inner, metrics)

    def __init__(self, inner: Any, metrics: Metrics) -> None:
        self.inner = inner
        self.metrics = metrics
        self._lock = threading.Lock()
        self._owners: OrderedDict[str, tuple[str, str]] = OrderedDict()
        self._attempts: OrderedDict[tuple[str, str], datetime] = OrderedDict()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _remember(self, execution_id: str, tenant: str, workflow: str) -> None:
        with self._lock:
            self._owners[execution_id] = (tenant, workflow)
            self._owners.move_to_end(execution_id)
            while len(self._owners) > _REMEMBER:
                self._owners.popitem(last=False)

    def _owner(self, execution_id: str) -> tuple[str, str] | None:
        with self._lock:
            return self._owners.get(execution_id)

    def _started(self, new: NewExecution) -> None:
        self._remember(new.id, new.tenant, new.workflow)
        self.metrics.inc("wovyr_executions_started_total", new.tenant, workflow=new.workflow)
        self._observe_step(new.first_step)

    # --- intercepted calls ---------------------------------------------------------------

    def create_execution(
        self, new: NewExecution, *args: Any, **kwargs: Any
    ) -> tuple[bool, ExecutionRecord]:
        created, record = self.inner.create_execution(new, *args, **kwargs)
        if created:
            self._started(new)
        return created, record

    def update_schedule(
        self, record: Any, expected_version: int, starts: Sequence[Any] = (), **kwargs: Any
    ) -> bool:
        applied = bool(self.inner.update_schedule(record, expected_version, starts, **kwargs))
        if applied:
            for new in starts:
                self._started(new)
        return applied

    def claim(self, *args: Any, **kwargs: Any) -> list[Claim]:
        claims: list[Claim] = self.inner.claim(*args, **kwargs)
        for c in claims:
            self._remember(c.execution_id, c.tenant, str(c.checkpoint.get("workflow", "")))
        return claims

    def load(self, *args: Any, **kwargs: Any) -> ExecutionRecord | None:
        record: ExecutionRecord | None = self.inner.load(*args, **kwargs)
        if record is not None:
            self._remember(record.id, record.tenant, record.workflow)
        return record

    def commit(self, steps: Sequence[StepWrite], *args: Any, **kwargs: Any) -> list[CommitOutcome]:
        outcomes: list[CommitOutcome] = self.inner.commit(steps, *args, **kwargs)
        for step, outcome in zip(steps, outcomes, strict=False):
            if outcome is CommitOutcome.OK:
                self._observe_step(step)
            elif outcome is CommitOutcome.LEASE_LOST:
                self.metrics.inc("wovyr_lease_losses_total")
        return outcomes

    def _observe_step(self, step: StepWrite) -> None:
        owner = self._owner(step.execution_id)
        if owner is None or not step.events:
            return
        tenant, workflow = owner
        inc: Callable[..., None] = self.metrics.inc
        for event in step.events:
            kind = event.type
            if kind == EventType.ACTIVITY_STARTED:
                self._attempt_started(step.execution_id, str(event.data.get("activity")), event.at)
            elif kind in (EventType.ACTIVITY_COMPLETED, EventType.ACTIVITY_FAILED):
                retry = kind == EventType.ACTIVITY_FAILED and bool(event.data.get("will_retry"))
                if retry:
                    inc("wovyr_activity_retries_total", tenant, workflow=workflow)
                began = self._attempt_ended(step.execution_id, str(event.data.get("activity")))
                if began is not None:
                    outcome = "completed" if kind == EventType.ACTIVITY_COMPLETED else "failed"
                    self.metrics.observe(
                        "wovyr_activity_duration_seconds",
                        max(0.0, (event.at - began).total_seconds()),
                        tenant,
                        workflow=workflow,
                        outcome="retried" if retry else outcome,
                    )
            elif kind in _TERMINAL:
                inc(
                    "wovyr_executions_finished_total",
                    tenant,
                    workflow=workflow,
                    status=_TERMINAL[kind],
                )

    def _attempt_started(self, execution_id: str, activity: str, at: datetime) -> None:
        with self._lock:
            self._attempts[(execution_id, activity)] = at
            while len(self._attempts) > _REMEMBER:
                self._attempts.popitem(last=False)

    def _attempt_ended(self, execution_id: str, activity: str) -> datetime | None:
        with self._lock:
            return self._attempts.pop((execution_id, activity), None)
