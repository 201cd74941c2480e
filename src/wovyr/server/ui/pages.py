"""What the UI pages show, built from the engine: list filters and paging, status counts,
one execution's DAG, activities, waits and timeline. No HTTP here (see `routes.py`)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlencode

from markupsafe import Markup

from wovyr.activities.builtin.wait import WaitStep
from wovyr.activities.failures import tracebacks_in, without_tracebacks
from wovyr.definition.model import Activity, Workflow
from wovyr.engine.bulk import BulkFilter
from wovyr.engine.engine import Engine, ExecutionView
from wovyr.engine.labels import parse_label_pairs
from wovyr.engine.quotas import MODEL_COST, MODEL_TOKENS, day_of
from wovyr.engine.reads import ListOptions
from wovyr.errors import InputError, WovyrError
from wovyr.server.ui.agent_steps import SubStep, agent_steps, render_steps, steps_summary
from wovyr.server.ui.dag import DagLayout, layout_dag, render_svg
from wovyr.server.ui.gantt import render_gantt
from wovyr.server.ui.present import (
    WAIT_KINDS,
    as_datetime,
    describe_waiting,
    pretty_json,
    timeline,
    wait_kinds,
    with_times,
)
from wovyr.statuses import SHOWN_STATUSES as LIST_STATUSES
from wovyr.store.base import ExecutionRecord

__all__ = [
    "LIST_STATUSES",
    "ExecutionPage",
    "ListFilters",
    "bulk_filter",
    "execution_page",
    "find_executions",
    "status_counts",
]

COUNT_CAP = 500
SCAN_CAP = 5000
TIMELINE_PAGE = 200
CHILDREN_SHOWN = 50
_LAYOUTS: OrderedDict[str, DagLayout] = OrderedDict()
_LAYOUTS_LOCK = threading.Lock()
_LAYOUT_CACHE = 64


@dataclass(frozen=True)
class ListFilters:
    """The list page's filters, as held in its URL (so a view can be shared)."""

    workflow: str = ""
    status: str = ""
    created_from: datetime | None = None
    created_to: datetime | None = None
    waiting: str = ""
    limit: int = 50
    cursor: tuple[datetime, str] | None = None
    errors: tuple[str, ...] = ()
    # search: workflow names containing `name` (any case), ids starting with `id`, labels
    name: str = ""
    id: str = ""
    label: str = ""  # `key=value` pairs, space separated (all must match)
    labels: tuple[tuple[str, str], ...] = ()
    version: str = ""  # with `workflow`: that version's executions (read from each row)

    @classmethod
    def parse(cls, query: Mapping[str, str]) -> ListFilters:
        errors: list[str] = []

        def when(name: str) -> datetime | None:
            raw = (query.get(name) or "").strip()
            if not raw:
                return None
            value = as_datetime(raw)
            if value is None:
                errors.append(f"{name.replace('_', ' ')}: {raw!r} is not a date and time")
            return value

        status = (query.get("status") or "").strip()
        if status and status not in LIST_STATUSES:
            errors.append(f"status: {status!r} is not one of {', '.join(LIST_STATUSES)}")
            status = ""
        waiting = (query.get("waiting") or "").strip()
        if waiting and waiting not in WAIT_KINDS:
            errors.append(f"waiting on: {waiting!r} is not one of {', '.join(WAIT_KINDS)}")
            waiting = ""
        try:
            limit = min(200, max(1, int(query.get("limit") or 50)))
        except ValueError:
            errors.append("limit: not a number")
            limit = 50
        cursor = None
        raw_cursor = query.get("after") or ""
        if raw_cursor:
            at_text, _, last_id = raw_cursor.partition("~")
            at = as_datetime(at_text)
            if at is None or not last_id:
                errors.append("after: not a page cursor from this list")
            else:
                cursor = (at, last_id)
        label = (query.get("label") or "").strip()[:1000]
        labels: tuple[tuple[str, str], ...] = ()
        if label:
            try:
                labels = tuple(parse_label_pairs(label.split(), "label").items())
            except InputError as exc:
                errors.append(f"label: {exc}")
        return cls(
            name=(query.get("name") or "").strip()[:128],
            id=(query.get("id") or "").strip()[:128],
            label=label,
            labels=labels,
            workflow=(query.get("workflow") or "").strip()[:128],
            version=(query.get("version") or "").strip()[:128],
            status=status,
            created_from=when("created_from"),
            created_to=when("created_to"),
            waiting=waiting,
            limit=limit,
            cursor=cursor,
            errors=tuple(errors),
        )

    def query(self, **changes: Any) -> str:
        """This view's query string with `changes` (None drops a field); no cursor unless
        one is given, so filter links always start from the first page."""
        values: dict[str, Any] = {
            "workflow": self.workflow,
            "version": self.version,
            "name": self.name,
            "id": self.id,
            "label": self.label,
            "status": self.status,
            "created_from": _form_time(self.created_from),
            "created_to": _form_time(self.created_to),
            "waiting": self.waiting,
            "limit": self.limit if self.limit != 50 else "",
        }
        values.update(changes)
        return urlencode({k: v for k, v in values.items() if v not in (None, "")})

    @property
    def cursor_text(self) -> str:
        return cursor_text(self.cursor) if self.cursor else ""

    def url(self, base: str, **changes: Any) -> str:
        query = self.query(**changes)
        return f"{base}?{query}" if query else base

    def form_time(self, name: str) -> str:
        return _form_time(getattr(self, name))


def _form_time(value: datetime | None) -> str:
    """The value a `datetime-local` input shows (UTC, minutes)."""
    return value.strftime("%Y-%m-%dT%H:%M") if value is not None else ""


def cursor_text(cursor: tuple[datetime, str]) -> str:
    return f"{cursor[0].isoformat()}~{cursor[1]}"


@dataclass(frozen=True)
class Found:
    items: list[ExecutionRecord]
    next_cursor: tuple[datetime, str] | None
    scanned: int
    scan_capped: bool = False


def _matcher(filters: ListFilters) -> Callable[[ExecutionRecord], bool] | None:
    if not filters.waiting and not filters.version:
        return None

    def matches(record: ExecutionRecord) -> bool:
        if filters.version and record.version != filters.version:
            return False
        return not filters.waiting or filters.waiting in wait_kinds(record.waiting_on)

    return matches


def _selected(
    filters: ListFilters,
    status: str | None,
    limit: int,
    cursor: tuple[datetime, str] | None = None,
) -> ListOptions:
    """A page of what the filters select (workflow, name, id, labels, creation time) with
    `status`."""
    return ListOptions(
        limit=limit,
        cursor=cursor,
        workflow=filters.workflow or None,
        name=filters.name or None,
        id_prefix=filters.id or None,
        labels=dict(filters.labels) or None,
        status=status,
        created_after=filters.created_from,
        created_before=filters.created_to,
    )


def find_executions(engine: Engine, filters: ListFilters) -> Found:
    """One page of the list, newest first. The store filters by workflow, status (`waiting`
    included) and creation time through its indexes; the waiting-on kind is read from each
    row's `waiting_on`, so those pages scan forward (at most SCAN_CAP rows) until full."""
    status = filters.status or ("waiting" if filters.waiting else None)
    if filters.waiting and status != "waiting":  # only a waiting execution waits on anything
        return Found([], None, 0)
    matches = _matcher(filters)

    def fetch(limit: int, cursor: tuple[datetime, str] | None) -> Any:
        return engine.list(**_selected(filters, status, limit, cursor))

    if matches is None:
        page = fetch(filters.limit, filters.cursor)
        return Found(page.items, page.next_cursor, len(page.items))
    found: list[ExecutionRecord] = []
    cursor, scanned = filters.cursor, 0
    while True:
        page = fetch(min(1000, max(200, filters.limit * 4)), cursor)
        for record in page.items:
            scanned += 1
            if matches(record):
                found.append(record)
                if len(found) == filters.limit:
                    more = page.next_cursor is not None or record is not page.items[-1]
                    nxt = (record.created_at, record.id) if more else None
                    return Found(found, nxt, scanned)
        if page.next_cursor is None:
            return Found(found, None, scanned)
        cursor = page.next_cursor
        if scanned >= SCAN_CAP:
            return Found(found, cursor, scanned, scan_capped=True)


def status_counts(engine: Engine, filters: ListFilters) -> dict[str, str]:
    """Executions per status under the same workflow and time filters (capped: `500+`);
    each execution counts under one status (`running` ones are those not `waiting`)."""
    counts: dict[str, str] = {}
    for status in LIST_STATUSES:
        page = engine.list(**_selected(filters, status, COUNT_CAP))
        more = page.next_cursor is not None
        counts[status] = f"{len(page.items)}{'+' if more else ''}"
    return counts


def safe_definition(engine: Engine, digest: str) -> Workflow | None:
    try:
        return engine.definition(digest)
    except WovyrError:
        return None


def list_rows(engine: Engine, items: list[ExecutionRecord], now: datetime) -> list[dict[str, Any]]:
    rows = []
    for record in items:
        workflow = safe_definition(engine, record.definition_hash) if record.waiting_on else None
        rows.append(
            {
                "id": record.id,
                "href": quote(record.id, safe=":"),
                "workflow": record.workflow,
                "version": record.version,
                "status": record.shown_status,
                "waiting": describe_waiting(record.waiting_on, now, workflow),
                "created_at": record.created_at,
                "updated_at": record.updated_at,
                "parent_id": record.parent_id,
                "labels": sorted(record.labels.items()),
            }
        )
    return rows


def _with_steps(rows: list[dict[str, Any]], steps: Mapping[str, list[SubStep]]) -> None:
    """An agent or llm activity's row gets its calls (`agent_steps`): their table, their
    count in its kind (what its node in the DAG says), and an agent's their graph."""
    for row in rows:
        found = steps.get(row["id"])
        if not found:
            continue
        row["steps"] = found
        row["steps_summary"] = steps_summary(found)
        if row["kind"] == "agent":
            row["steps_svg"] = Markup(render_steps(found))
        row["kind"] = f"{row['kind']} \u00b7 {len(found)} calls"


def _model_usage(engine: Engine, steps: Mapping[str, list[SubStep]], now: datetime) -> str:
    """What the execution's model calls used in all, and its tenant's today (the ledger's
    row of today: counted with or without a quota)."""
    calls = [s for found in steps.values() for s in found if s.kind == "model"]
    used = engine.store.quota_usage(engine.tenant, day_of(now))
    tokens, cost = used.get(MODEL_TOKENS, 0.0), used.get(MODEL_COST)
    today = f"{tokens:,.0f} tokens" + (f" \u00b7 ${cost:.4f}" if cost else "")
    if not calls:
        return f"tenant today: {today}"
    return f"{steps_summary(calls)}; tenant today: {today}"


def _gantt_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The activities' rows, and an agent's calls as rows under it."""
    out = list(rows)
    for row in rows:
        for step in row.get("steps", ()) if row.get("steps_svg") else ():
            out.append(
                {
                    "id": f"{row['id']} \u203a {step.label}",
                    "parent": row["id"],
                    "label": step.label,
                    "note": step.measures(),
                    "status": step.status,
                    "started": step.started or step.finished,
                    "finished": step.finished,
                }
            )
    return out


def _layout(digest: str, workflow: Workflow) -> DagLayout:
    """Layouts depend only on the pinned definition: cache them by its content hash."""
    with _LAYOUTS_LOCK:
        cached = _LAYOUTS.get(digest)
        if cached is not None:
            _LAYOUTS.move_to_end(digest)
            return cached
    made = layout_dag([(a.id, a.needs) for a in workflow.activities])
    with _LAYOUTS_LOCK:
        _LAYOUTS[digest] = made
        while len(_LAYOUTS) > _LAYOUT_CACHE:
            _LAYOUTS.popitem(last=False)
    return made


def _ran(rows: list[dict[str, Any]]) -> DagLayout:
    """A code workflow's graph: the steps that ran, each drawn after the steps whose
    results its function took before asking for it (steps asked together, as by
    `asyncio.gather`, side by side)."""
    ids = {row["id"] for row in rows}
    return layout_dag(
        [(row["id"], [a for a in row.get("after") or () if a in ids]) for row in rows]
    )


@dataclass
class ExecutionPage:
    view: ExecutionView
    workflow: Workflow
    svg: Markup
    gantt: Markup  # empty until an activity started
    activities: list[dict[str, Any]]
    events: list[Any]
    events_from: int
    older: int | None
    newer: int | None
    waiting: Markup | None
    approvals: list[dict[str, Any]] = field(default_factory=list)
    signals: list[str] = field(default_factory=list)
    json: dict[str, str] = field(default_factory=dict)
    children: list[dict[str, Any]] = field(default_factory=list)
    model_usage: str = ""  # its model calls in all, and its tenant's today

    @property
    def status(self) -> str:
        return self.view.status

    @property
    def actions_key(self) -> str:
        """Changes when the action forms must change (the script swaps them only then)."""
        names = ",".join(a["activity"] for a in self.approvals)
        return f"{self.view.finished}|{names}|{','.join(self.signals)}"


def _activity_detail(info: Mapping[str, Any]) -> str | None:
    if info.get("error"):
        err = info["error"]
        return str(err.get("message") if isinstance(err, dict) else err)
    if info.get("skip_reason"):
        return f"skipped: {info['skip_reason']}"
    wait = info.get("wait")
    if isinstance(wait, dict):
        if wait.get("kind") == "signal":
            return f"waits for signal {wait.get('name')}"
        if wait.get("kind") == "timer":
            return f"waits until {wait.get('fire_at')}"
        if wait.get("kind") == "child":
            return f"waits for child {wait.get('id')}"
        if wait.get("kind") == "repeat":
            limit = info.get("max_iterations")
            at = wait.get("at")
            of = f" of ≤ {limit}" if limit else ""
            return f"iteration {wait.get('iteration')}{of}, " + (f"next at {at}" if at else "next")
        return "waits for approval"
    return None


def _kind(spec: Activity | None, info: dict[str, Any]) -> Any:
    """A wait shows what it waits for (signal, approval, timer); others their kind."""
    wait = spec.step_of(WaitStep) if spec is not None else None
    return wait.wait.kind if wait is not None else info.get("kind")


def _activity_rows(view: ExecutionView, workflow: Workflow, now: datetime) -> list[dict[str, Any]]:
    defined = workflow.activity_map()
    rows = []
    for aid, info in view.activities.items():
        spec = defined.get(aid)
        rows.append(
            {
                "id": aid,
                **info,
                "kind": _kind(spec, info),
                "detail": _activity_detail(info),
                "detail_html": with_times(_activity_detail(info) or "", now),
                "input_json": pretty_json(info.get("input")) if info.get("input") else None,
                "output_json": pretty_json(info.get("output"))
                if info.get("output") is not None
                else None,
                "error_json": pretty_json(without_tracebacks(info["error"]))
                if info.get("error")
                else None,
                "traceback": _traceback(info.get("error")),
                "started": as_datetime(info.get("started_at")),
                "finished": as_datetime(info.get("finished_at")),
            }
        )
    return rows


def execution_page(
    engine: Engine, execution_id: str, now: datetime, events_from: int | None = None
) -> ExecutionPage:
    """Everything one execution's page shows (raises NotFound like `engine.query`). Each
    run of a continue-as-new chain has its own page (not followed), linked to the run it
    continues and to the run that continues it."""
    view = engine.query(execution_id, follow=False)
    workflow = engine.definition(view.definition_hash)
    rows = _activity_rows(view, workflow, now)
    attempts, _, _ = engine.logs(execution_id, follow=False)
    for row in rows:  # each activity's attempts that logged (tracebacks are shown already)
        row["logs"] = [a for a in attempts if a["activity"] == row["id"] and a["lines"]]
    agents = [a.id for a in workflow.activities if a.kind in ("agent", "llm")]
    steps = agent_steps(engine, execution_id, agents)
    _with_steps(rows, steps)
    layout = _layout(view.definition_hash, workflow) if workflow.code is None else _ran(rows)
    svg = Markup(render_svg(layout, {r["id"]: r for r in rows}, link_prefix="#act-"))
    total = view.event_count
    start = max(0, total - TIMELINE_PAGE) if events_from is None else events_from
    start = min(max(0, start), max(0, total - 1))
    latencies = {  # an agent's calls: each its own event
        s.seq: s.latency
        for found in steps.values()
        for s in found
        if s.latency is not None and s.where.startswith("turn")
    }
    events = timeline(
        engine.history(execution_id, after_seq=start, limit=TIMELINE_PAGE, follow=False),
        now,
        latencies,
    )
    approvals = [w for w in view.pending_waits if w.get("kind") == "approval"]
    signals = sorted({str(w.get("name")) for w in view.pending_waits if w.get("kind") == "signal"})
    page = ExecutionPage(
        view=view,
        workflow=workflow,
        svg=svg,
        gantt=Markup(render_gantt(_gantt_rows(rows), as_datetime(view.created_at) or now, now)),
        activities=rows,
        events=events,
        events_from=start,
        older=max(0, start - TIMELINE_PAGE) if start > 0 else None,
        newer=start + TIMELINE_PAGE if start + TIMELINE_PAGE < total else None,
        waiting=describe_waiting(view.waiting_on, now, workflow),
        approvals=[] if view.finished else approvals,
        signals=[] if view.finished else signals,
        model_usage=_model_usage(engine, steps, now) if agents else "",
    )
    children = engine.list(parent_id=execution_id, limit=CHILDREN_SHOWN).items
    page.children = list_rows(engine, children, now)
    page.json = {
        "input": pretty_json(view.input),
        "output": pretty_json(view.output) if view.output is not None else "",
        "error": pretty_json(without_tracebacks(view.error)) if view.error else "",
        "traceback": _traceback(view.error) or "",
    }
    return page


def _traceback(error: Any) -> str | None:
    """The failed handler's traceback in `error` (shown as text, not inside the JSON)."""
    found = tracebacks_in({"error": error})
    return found[0][1] if found else None


def bulk_filter(f: ListFilters) -> BulkFilter | None:
    """The bulk filter of the list's filters, or None when the list filters on something a
    batch cannot (a workflow version, a partial name, a wait kind) or on nothing at all."""
    if f.version or f.name or f.waiting or f.errors:
        return None
    if not (f.workflow or f.status or f.labels or f.id or f.created_from or f.created_to):
        return None
    return BulkFilter(
        status=f.status or None,
        workflow=f.workflow or None,
        labels=dict(f.labels),
        id_prefix=f.id or None,
        since=f.created_from,
        until=f.created_to,
    )
