"""What the schedules, definitions, workers and flow-control pages show, built from the
engine of the signed-in tenant. No HTTP here (see `catalog_routes.py`).

Workers are shared by every tenant, so the workers page tells a tenant only what leaks
nothing of the others: how many workers are live, and which of them hold leases on the
tenant's own executions. The process list (owner ids, modes, heartbeats) is for admins.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlencode

from markupsafe import Markup

from wovyr.definition.dump import as_yaml
from wovyr.definition.model import Workflow
from wovyr.engine.engine import Engine
from wovyr.errors import NotFound
from wovyr.scheduling.schedules import Schedules, spec_of
from wovyr.server.ui.dag import layout_dag, render_svg
from wovyr.store.flow import RateLimitRecord
from wovyr.store.schedules import ScheduleRecord

__all__ = [
    "DefinitionPage",
    "FlowPage",
    "WorkersPage",
    "definition_page",
    "definition_rows",
    "flow_page",
    "holder_link",
    "schedule_rows",
    "utc_text",
    "workers_page",
]

NEXT_FIRES = 3
LEASE_SCAN = 1000
HOLDERS_SHOWN = 50  # ids shown per key and list; the counts say how many there are
KEYS_DETAILED = 200  # keys whose holders are read (one store read each); the rest: counts


def utc_text(at: datetime) -> str:
    return at.strftime("%Y-%m-%d %H:%M:%S UTC")


def local_time(at: datetime) -> Markup:
    """A `<time>` whose text is the UTC time; the page's script rewrites it to the viewer's
    local time (`data-local`). Without the script it stays UTC."""
    return Markup('<time datetime="{}" data-local>{}</time>').format(at.isoformat(), utc_text(at))


def schedule_rows(service: Schedules) -> list[dict[str, Any]]:
    rows = []
    for record in service.list()[:1000]:
        rows.append(
            {
                "id": record.id,
                "href": quote(record.id, safe=""),
                "workflow": record.workflow,
                "href_workflow": quote(record.workflow, safe=""),
                "pinned": record.definition_hash is not None,
                "describe": _describe(record),
                "paused": record.paused,
                "note": record.note,
                "overlap": record.overlap,
                "next": [
                    {"utc": utc_text(t), "local": local_time(t)}
                    for t in _next_fires(service, record)
                ],
                "last_fire_at": record.last_fire_at,
                "fired": record.fired_count,
                "skipped": record.skipped_count,
                "missed": record.missed_count,
            }
        )
    return rows


def _describe(record: ScheduleRecord) -> str:
    try:
        return spec_of(record).describe()
    except (ValueError, KeyError):
        return str(record.spec)


def _next_fires(service: Schedules, record: ScheduleRecord) -> list[datetime]:
    try:
        return service.next_fire_times(record, NEXT_FIRES)
    except (ValueError, OverflowError):  # ticks beyond datetime's range: show what exists
        return [record.next_fire_at] if record.next_fire_at else []


def definition_rows(engine: Engine) -> list[dict[str, Any]]:
    """One row per name: its versions, newest applied first."""
    by_name: dict[str, dict[str, Any]] = {}
    for record in engine.store.list_registered(engine.tenant):
        row = by_name.setdefault(
            record.name,
            {
                "name": record.name,
                "href": quote(record.name, safe=""),
                "latest": record.version,
                "applied_at": record.created_at,
                "versions": [],
            },
        )
        row["versions"].append(record.version)
    return sorted(by_name.values(), key=lambda r: r["name"])


@dataclass
class DefinitionPage:
    name: str
    version: str
    hash: str
    applied_at: datetime
    source: str
    svg: Markup
    workflow: Workflow
    versions: list[dict[str, Any]] = field(default_factory=list)
    executions_href: str = ""


def definition_page(engine: Engine, name: str, version: str | None, base: str) -> DefinitionPage:
    """One name's versions, and the chosen one's document and DAG (NotFound when the
    tenant has no such name or version)."""
    record = engine.store.registered_definition(name, version, engine.tenant)
    if record is None:
        raise NotFound(f"definition {name!r} not found")
    workflow = engine.definition(record.hash, engine.tenant)
    layout = layout_dag([(a.id, a.needs) for a in workflow.activities])
    info = {a.id: {"status": "pending", "kind": a.kind} for a in workflow.activities}
    svg = Markup(render_svg(layout, info))
    page_href = f"{base}/definitions/{quote(name, safe='')}"
    versions = [
        {
            "version": r.version,
            "hash": r.hash,
            "applied_at": r.created_at,
            "href": f"{page_href}?{urlencode({'version': r.version})}",
            "executions": f"{base}?{urlencode({'workflow': name, 'version': r.version})}",
            "current": r.version == record.version,
        }
        for r in engine.store.list_registered(engine.tenant)
        if r.name == name
    ]
    return DefinitionPage(
        name=record.name,
        version=record.version,
        hash=record.hash,
        applied_at=record.created_at,
        source=as_yaml(record.source),
        svg=svg,
        workflow=workflow,
        versions=versions,
        executions_href=f"{base}?{urlencode({'workflow': name})}",
    )


@dataclass
class WorkersPage:
    membership: bool  # the store keeps the live workers (PostgreSQL)
    live: int | None  # live workers (None: the store does not know)
    members: list[dict[str, Any]]  # admins only
    leases: list[dict[str, Any]]  # this tenant's in-flight executions, per worker
    in_flight: int
    scan_capped: bool
    own: dict[str, Any] | None = None  # this server's worker (admins only)
    own_runs: bool = False  # this server runs a worker (what every role may know)


def workers_page(
    engine: Engine,
    now: datetime,
    ttl_seconds: float,
    admin: bool,
    own: dict[str, Any] | None = None,
) -> WorkersPage:
    """What the workers page shows the signed-in tenant: the live workers (the store's
    membership, PostgreSQL; `own` is the server's own worker, the one a SQLite store's
    server knows of), and which of them hold this tenant's executions. The processes'
    ids and heartbeats are for admins only."""
    lister = getattr(engine.store, "members", None)
    members: list[dict[str, Any]] = []
    live: int | None = None
    if callable(lister):
        found = lister(now, ttl_seconds)
        live = len(found)
        if admin:
            members = [
                {
                    "owner": m.owner,
                    "mode": m.mode,
                    "joined_at": m.joined_at,
                    "last_seen": m.last_seen,
                }
                for m in found
            ]
    page = engine.list(status="running", limit=LEASE_SCAN)
    held = Counter(
        r.lease_owner
        for r in page.items
        if r.lease_owner and (r.lease_until is None or r.lease_until > now)
    )
    leases = [{"owner": owner, "slots": n} for owner, n in sorted(held.items())]
    return WorkersPage(
        membership=callable(lister),
        live=live,
        members=members,
        leases=leases if admin else [],
        in_flight=sum(held.values()),
        scan_capped=page.next_cursor is not None,
        own=own if admin else None,
        own_runs=own is not None,
    )


@dataclass
class FlowPage:
    keys: list[dict[str, Any]]  # concurrency keys in use: workflow ones, then activity ones
    buckets: list[dict[str, Any]]  # rate-limit buckets, by key


def holder_link(holder: str, base: str) -> dict[str, str]:
    """A slot holder as shown: its id and the page of the execution it is or belongs to.
    A workflow key's holder is an execution id; an activity key's is the attempt's
    `<execution>/<activity>/<attempt>` (execution ids never contain `/`)."""
    execution = holder.split("/", 1)[0]
    return {"id": holder, "href": f"{base}/executions/{quote(execution, safe='')}"}


def flow_page(engine: Engine, now: datetime, base: str) -> FlowPage:
    """The tenant's concurrency keys in use, each with who holds its slots and (for a
    workflow key) which executions wait for one, and its rate-limit buckets with the
    tokens they hold at `now`. Every read names the engine's tenant. Holders are read for
    the first `KEYS_DETAILED` keys only: a tenant with thousands of keys in use still
    gets its page in bounded reads (the others show their counts)."""
    store, tenant = engine.store, engine.tenant
    keys = []
    for n, key in enumerate(engine.flow_keys()):
        if n >= KEYS_DETAILED:
            holders, waiting = [], []
        elif key.kind == "workflow":
            state = store.slot_state(tenant, key.key)
            holders, waiting = state.holders, state.waiting
        else:  # activity waiters are attempts not yet started: counted, not named
            holders, waiting = store.activity_slot_holders(tenant, key.key, now), []
        keys.append(
            {
                "kind": key.kind,
                "key": key.key,
                "running": key.running,
                "waiting": key.waiting,
                "holders": [holder_link(h, base) for h in holders[:HOLDERS_SHOWN]],
                "waiters": [holder_link(w, base) for w in waiting[:HOLDERS_SHOWN]],
                "more_holders": max(0, len(holders) - HOLDERS_SHOWN),
                "more_waiters": max(0, len(waiting) - HOLDERS_SHOWN),
            }
        )
    return FlowPage(keys=keys, buckets=[_bucket_row(r, now) for r in engine.rate_limits()])


def _bucket_row(record: RateLimitRecord, now: datetime) -> dict[str, Any]:
    return {
        "key": record.key,
        "href": quote(record.key, safe=""),
        "capacity": _number(record.capacity),
        "per_second": _number(record.per_second),
        "tokens": _number(record.tokens_at(now)),
        "declared": record.declared,
        "updated_by": record.updated_by,
    }


def _number(value: float) -> str:
    """At most three decimals, without trailing zeros (2, 0.5, 8.333)."""
    return f"{value:.3f}".rstrip("0").rstrip(".")
