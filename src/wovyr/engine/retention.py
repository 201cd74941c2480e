"""Retention: how long a tenant's finished executions are kept, and the pass that purges
the older ones (optionally exporting them first).

A tenant's settings (`Retention`) are stored in its tenant row as JSON:

- `days`: finished executions (completed, failed, cancelled, continued) whose finish time
  is more than this many days ago are purged; None keeps them (the default);
- `workflows`: per workflow name, its own number of days, which wins over `days` (the most
  specific setting wins: a workflow's override applies even where the tenant keeps all);
- `export_to`: a folder on the host; each batch is written there as JSON lines (one
  execution a line: its view and events, see `export_lines`), fsynced, before the
  transaction that purges it. Only the host's administrator sets it (a path on the host
  is not a tenant admin's to choose).

`purge_expired` is one pass for one tenant in bounded batches (`batch` executions a
transaction, at most `max_batches` a pass, so a backlog is worked off over several passes
without holding the store); `purge_all` does it for every tenant with settings (the
server's housekeeping, and `wovyr admin retention run`). Each purged batch is one audit
record (`executions.purge`) in the purge's own transaction.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

from wovyr.engine.definitions import Definitions
from wovyr.engine.reads import history, query
from wovyr.engine.runtime import Runtime, RuntimeHolder
from wovyr.engine.tenants import put_settings
from wovyr.errors import InputError, NotFound, Problem
from wovyr.files import atomic_write, fsync_folder
from wovyr.store.audit import AuditEntry
from wovyr.store.platform import TenantStore
from wovyr.store.retention import Expired, ExpiredFilter

__all__ = [
    "MAX_DAYS",
    "PurgeReport",
    "Retention",
    "change_retention",
    "export_file",
    "export_lines",
    "iter_finished",
    "parse_retention",
    "purge_all",
    "purge_expired",
    "retention_of",
    "set_retention",
    "tenant_retention",
]

MAX_DAYS = 36_500  # a hundred years: beyond it a finish time cannot be told from "never"
SYSTEM_ACTOR = "system:retention"  # the audit actor of a pass nobody asked for (the server's)
_WORKFLOW_NAMES = 100_000  # the most workflow names of one tenant a pass looks at


@dataclass(frozen=True)
class Retention:
    """A tenant's retention settings (nothing set: keep everything)."""

    days: int | None = None
    workflows: Mapping[str, int] = field(default_factory=dict)
    export_to: str | None = None

    @property
    def empty(self) -> bool:
        return self.days is None and not self.workflows

    def days_for(self, workflow: str) -> int | None:
        """How many days `workflow`'s finished executions are kept (None: for ever)."""
        return self.workflows.get(workflow, self.days)

    def to_dict(self) -> dict[str, Any]:
        return {
            "days": self.days,
            "workflows": dict(sorted(self.workflows.items())),
            "export_to": self.export_to,
        }


def _days(value: object, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_DAYS:
        raise InputError([Problem(f"days must be a whole number from 1 to {MAX_DAYS}", path=path)])
    return value


def parse_retention(data: Mapping[str, Any]) -> Retention:
    """The settings in `data` (the form `to_dict` writes), checked; `InputError` names
    every field that is wrong."""
    unknown = sorted(set(data) - {"days", "workflows", "export_to"})
    if unknown:
        problems = [Problem(f"unknown retention field {name!r}", path=name) for name in unknown]
        raise InputError(problems)
    days = data.get("days")
    workflows = data.get("workflows") or {}
    export_to = data.get("export_to")
    if not isinstance(workflows, Mapping):
        raise InputError([Problem("workflows must map names to days", path="workflows")])
    if export_to is not None and (not isinstance(export_to, str) or not export_to):
        raise InputError([Problem("export_to must be a folder path", path="export_to")])
    return Retention(
        days=None if days is None else _days(days, "days"),
        workflows={str(k): _days(v, f"workflows.{k}") for k, v in workflows.items()},
        export_to=export_to,
    )


def retention_of(store: TenantStore, tenant: str) -> Retention:
    """What is set for `tenant` (a stored value that no longer parses keeps everything:
    a broken row must never purge more than was asked)."""
    record = store.get_tenant(tenant)
    if record is None or record.retention is None:
        return Retention()
    try:
        return parse_retention(record.retention)
    except InputError:
        return Retention()


def set_retention(
    store: TenantStore,
    tenant: str,
    retention: Retention,
    *,
    by: str,
    at: datetime,
    audit: AuditEntry | None = None,
) -> Retention:
    """Store `retention` for `tenant` (its other settings kept; `audit` appended in the
    same transaction); return it as stored."""
    stored = None if retention.empty and retention.export_to is None else retention.to_dict()
    put_settings(store, tenant, by=by, at=at, audit=audit, retention=stored)
    return retention_of(store, tenant)


def tenant_retention(rt: Runtime) -> Retention:
    """The retention settings of `rt`'s tenant."""
    return retention_of(rt.store, rt.tenant)


def change_retention(rt: Runtime, retention: Retention, *, by: str) -> Retention:
    """Store the retention settings of `rt`'s tenant (the caller checked who may); return
    them. Audited as `tenant.retention` in the same transaction."""
    audit = rt.audit_entry("tenant.retention", rt.tenant, retention.to_dict())
    return set_retention(rt.store, rt.tenant, retention, by=by, at=rt.clock.now(), audit=audit)


@dataclass
class PurgeReport:
    """What one pass did for one tenant."""

    tenant: str
    purged: int = 0
    files: list[str] = field(default_factory=list)  # the export files written
    more: bool = False  # it stopped at `max_batches` with more left for the next pass

    def to_dict(self) -> dict[str, Any]:
        return {
            "tenant": self.tenant,
            "purged": self.purged,
            "files": list(self.files),
            "more": self.more,
        }


def iter_finished(
    engine: RuntimeHolder,
    workflow: str | None,
    finished_before: datetime,
    *,
    statuses: Iterable[str] | None = None,
    page: int = 500,
) -> Iterator[Expired]:
    """Every finished execution of the engine's tenant (of `workflow`, with one of
    `statuses`) that finished before `finished_before`, oldest first, page by page."""
    wanted = None if statuses is None else frozenset(statuses)
    rt = engine.runtime
    asked = ExpiredFilter(rt.tenant, workflow, finished_before, page)
    while True:
        found = rt.store.find_expired(asked)
        for item in found:
            if wanted is None or item.status in wanted:
                yield item
        if len(found) < page:
            return
        asked = replace(asked, after=(found[-1].finished_at, found[-1].id))


def export_lines(engine: RuntimeHolder | Runtime, ids: Sequence[str]) -> list[str]:
    """One JSON line per execution of the engine's tenant in `ids` (gone ones left out):
    `{"id", "tenant", "view", "events"}`: its view (what `wovyr workflows show --json`
    prints) and its events as shown (`history`: rendered inputs through their kind's
    redaction, sealed payloads opened)."""
    rt = engine if isinstance(engine, Runtime) else engine.runtime
    reader = Definitions(rt)
    lines = []
    for execution_id in ids:
        try:
            view = query(reader, execution_id, follow=False)
            events = history(reader, execution_id, follow=False)
        except NotFound:
            continue
        line = {
            "id": execution_id,
            "tenant": rt.tenant,
            "view": view.to_dict(),
            "events": [
                {"seq": e.seq, "type": e.type, "at": e.at.isoformat(), "data": e.data}
                for e in events
            ],
        }
        lines.append(json.dumps(line, default=str, separators=(",", ":"), sort_keys=True))
    return lines


def export_file(
    engine: RuntimeHolder,
    items: Iterable[Expired],
    path: str | os.PathLike[str],
    *,
    chunk: int = 200,
) -> int:
    """Write `items` (executions of the engine's tenant) to `path` as `export_lines` do,
    one line each, and return how many lines: written to a temporary file beside it,
    fsynced, then renamed over `path` (a crash leaves the old file or the whole new one)."""
    target = Path(path)
    temp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    count = 0
    try:
        with open(temp, "w", encoding="utf-8") as out:
            pending: list[str] = []
            for item in items:
                pending.append(item.id)
                if len(pending) == chunk:
                    count += _write_lines(out, export_lines(engine, pending))
                    pending = []
            count += _write_lines(out, export_lines(engine, pending))
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, target)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    fsync_folder(target.parent)
    return count


def _write_lines(out: TextIO, lines: Sequence[str]) -> int:
    out.writelines(line + "\n" for line in lines)
    return len(lines)


def _export(rt: Runtime, folder: str, ids: Sequence[str], now: datetime, n: int) -> str:
    """Write `ids` to a new file in `folder` (fsynced, with the folder) and name it."""
    os.makedirs(folder, mode=0o700, exist_ok=True)
    stamp = now.strftime("%Y%m%dT%H%M%S%fZ")
    for attempt in range(1000):
        path = Path(folder) / f"wovyr-{rt.tenant}-{stamp}-{n:04d}-{attempt}.jsonl"
        data = "".join(line + "\n" for line in export_lines(rt, ids))
        if atomic_write(path, data, 0o600, exclusive=True):
            return str(path)
    raise InputError([Problem(f"cannot find a free export file name in {folder}")])


def purge_expired(
    engine: RuntimeHolder,
    retention: Retention | None = None,
    *,
    batch: int = 500,
    max_batches: int = 20,
) -> PurgeReport:
    """One pass for the engine's tenant: purge its finished executions older than its
    retention (`retention`: else the stored one), at most `max_batches` batches of `batch`,
    each exported first when `export_to` is set."""
    return _purge(engine.runtime, retention, batch, max_batches)


def _purge(rt: Runtime, retention: Retention | None, batch: int, max_batches: int) -> PurgeReport:
    settings = retention_of(rt.store, rt.tenant) if retention is None else retention
    report = PurgeReport(rt.tenant)
    if settings.empty:
        return report
    now = rt.clock.now()
    cutoffs: list[tuple[str | None, int | None]]
    if settings.workflows:
        names = rt.store.workflow_names(rt.tenant, "", limit=_WORKFLOW_NAMES)
        cutoffs = [(name, settings.days_for(name)) for name in names]
    else:  # one walk of the tenant-wide index
        cutoffs = [(None, settings.days)]
    batches = 0
    for workflow, days in cutoffs:
        if days is None:
            continue
        before = now - timedelta(days=days)
        oldest = ExpiredFilter(rt.tenant, workflow, before, batch)
        while True:
            if batches == max_batches:
                report.more = bool(rt.store.find_expired(replace(oldest, limit=1)))
                if report.more:
                    return report
                break
            found = rt.store.find_expired(oldest)
            if not found:
                break
            ids = [item.id for item in found]
            if settings.export_to is not None:
                report.files.append(_export(rt, settings.export_to, ids, now, batches))
            audit = AuditEntry(
                now,
                rt.tenant,
                rt.actor or SYSTEM_ACTOR,
                "executions.purge",
                workflow or "*",
                {"count": len(ids), "finished_before": before.isoformat(), "days": days},
            )
            purged = len(rt.store.purge_executions(rt.tenant, ids, audit=audit))
            report.purged += purged
            batches += 1
            if len(found) < batch or not purged:  # none purged: another pass purged them
                break
    return report


def purge_all(
    engine: RuntimeHolder, *, batch: int = 500, max_batches: int = 20
) -> list[PurgeReport]:
    """`purge_expired` for every tenant that has retention settings."""
    reports = []
    for record in engine.runtime.store.list_tenants():
        if record.retention is None:
            continue
        rt = engine.runtime.for_tenant(record.tenant)
        reports.append(_purge(rt, retention_of(rt.store, rt.tenant), batch, max_batches))
    return reports
