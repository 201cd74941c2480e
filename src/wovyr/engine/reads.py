"""Reads through a `Reader`: one execution (following a continue-as-new chain), its view,
history and logs, and the executions of a tenant, filtered and paged.

A reader is a store, a tenant and the outline of a definition by hash
(`wovyr.engine.outline`): the engine's (`wovyr.engine.definitions.Definitions`, from the
definitions it has parsed) or a store's alone (`StoreReader`, what `wovyr workflows
show|list|history` read through: it imports neither the engine nor the workflow language).
Both answer with the same code, so their views cannot differ.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Protocol, TypedDict

from wovyr.engine.attempts import attempt_entries
from wovyr.engine.core.state import ExecutionState, ExecutionStatus, state_from_json
from wovyr.engine.labels import check_labels
from wovyr.engine.outline import Outline, outline_from_source
from wovyr.engine.views import ExecutionView, build_view, shown_events, status_filter
from wovyr.errors import InputError, NotFound, Problem
from wovyr.ids import continued_id
from wovyr.store.base import EventRecord, ExecutionFilter, ExecutionRecord, Page, Store

__all__ = [
    "ListOptions",
    "Reader",
    "Scope",
    "StoreReader",
    "execution_view",
    "history",
    "list_executions",
    "live",
    "load",
    "logs",
    "query",
    "reruns",
]


class ListOptions(TypedDict, total=False):
    """The filters and page of `list_executions`."""

    workflow: str | None
    status: str | None
    created_after: datetime | None
    created_before: datetime | None
    parent_id: str | None
    limit: int
    cursor: tuple[datetime, str] | None
    labels: Mapping[str, str] | None
    id_prefix: str | None
    name: str | None


class Scope(Protocol):
    """A store and the tenant read for (a `Runtime` is one)."""

    @property
    def store(self) -> Store: ...

    @property
    def tenant(self) -> str: ...


class Reader(Scope, Protocol):
    """What views and histories are read through: a scope, and what a view shows of a
    pinned definition."""

    def outline(self, definition_hash: str) -> Outline: ...


@dataclass(frozen=True)
class StoreReader:
    """A `Reader` over a store alone: a definition's outline is read from the JSON it is
    stored as (`outline_from_source`), through the workflow language only when it cannot be
    (`wovyr.engine.definitions.stored_workflow`: a definition stored as its source text, a
    kind an activity module registers)."""

    store: Store
    tenant: str

    def outline(self, definition_hash: str) -> Outline:
        record = self.store.get_definition(definition_hash, self.tenant)
        if record is None:
            raise NotFound(f"definition {definition_hash} not found")
        found = outline_from_source(record.source)
        if found is not None:
            return found
        from wovyr.engine.definitions import outline_of, stored_workflow

        return outline_of(stored_workflow(record))


_NAME_MATCHES = 50  # workflow names one name search lists executions of


def load(rt: Scope, execution_id: str) -> ExecutionRecord:
    record = rt.store.load(execution_id, rt.tenant)
    if record is None:
        raise NotFound(f"execution {execution_id} not found")
    return record


def live(rt: Scope, execution_id: str) -> ExecutionRecord:
    """The execution `execution_id` names, following a continue-as-new chain: a run that
    ended `continued` leads to the chain's last run (the live one while the chain goes
    on). Runs are named `continued_id(root, n)`, so the last is found in O(log n) loads
    (doubling, then halving); each found run must name the same chain, so an unrelated
    execution with a look-alike id is never followed. NotFound for a missing id."""
    record = load(rt, execution_id)
    if record.status != ExecutionStatus.CONTINUED:
        return record
    state = state_from_json(record.checkpoint or {})
    root, known = state.chain_root, state.chain_run

    def run(n: int) -> ExecutionRecord | None:
        found = rt.store.load(continued_id(root, n), rt.tenant)
        if found is None:
            return None
        if state_from_json(found.checkpoint or {}).chain_root != root:
            return None
        return found

    last, step = record, 1
    while True:  # doubling: the highest run that exists, up to a power of two beyond
        found = run(known + step)
        if found is None:
            break
        last, known = found, known + step
        if found.status != ExecutionStatus.CONTINUED:
            return found  # only a chain's last run ends otherwise (or runs)
        step *= 2
    low, high = known, known + step  # low exists, high does not
    while high - low > 1:
        middle = (low + high) // 2
        found = run(middle)
        if found is None:
            high = middle
            continue
        last, low = found, middle
        if found.status != ExecutionStatus.CONTINUED:
            return found
    return last


def reruns(rt: Scope, execution_id: str, limit: int = 50) -> list[str]:
    """The ids of the executions that rerun `execution_id` (newest first)."""
    page = rt.store.list_executions(
        ExecutionFilter(tenant=rt.tenant, rerun_of=execution_id, limit=limit)
    )
    return [r.id for r in page.items]


def query(rt: Reader, execution_id: str, *, follow: bool = True) -> ExecutionView:
    """The live state: appends no event and takes no lease. A run that continued as new
    answers with its chain's live (or last) run unless `follow` is False."""
    record = live(rt, execution_id) if follow else load(rt, execution_id)
    view = execution_view(rt, record, state_from_json(record.checkpoint or {}))
    if view.finished:  # only a finished execution can have reruns: no read for the rest
        view = replace(view, reruns=reruns(rt, record.id))
    return view


def list_executions(
    rt: Scope,
    *,
    workflow: str | None = None,
    status: str | None = None,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
    parent_id: str | None = None,
    limit: int = 50,
    cursor: tuple[datetime, str] | None = None,
    labels: Mapping[str, str] | None = None,
    id_prefix: str | None = None,
    name: str | None = None,
) -> Page:
    """Executions newest first; pass `page.next_cursor` back for the next page. `status`
    is the status shown (`waiting` and `running` are told apart by `waiting_on`).
    Search: `labels` (every one), `id_prefix` (ids starting so), `name` (workflow names
    containing it, any case: the executions of each matching name walk that name's index,
    and the store merges them into one page)."""
    if not 1 <= limit <= 1000:
        raise InputError([Problem("limit must be between 1 and 1000", path="limit")])
    if id_prefix is not None and not (0 < len(id_prefix) <= 200):
        raise InputError([Problem("an id prefix is 1-200 characters", path="id_prefix")])
    stored, waiting = status_filter(status)
    query = ExecutionFilter(
        tenant=rt.tenant,
        workflow=workflow,
        status=stored,
        waiting=waiting,
        created_after=created_after,
        created_before=created_before,
        parent_id=parent_id,
        limit=limit,
        cursor=cursor,
        labels=tuple(check_labels(labels).items()) if labels else (),
        id_prefix=id_prefix or None,
    )
    if not name or workflow is not None:
        return rt.store.list_executions(query)
    if len(name) > 200:
        raise InputError([Problem("a name search is at most 200 characters", path="name")])
    names = rt.store.workflow_names(rt.tenant, name, _NAME_MATCHES)
    if not names:
        return Page([])
    return rt.store.list_executions(replace(query, workflows=tuple(names)))


def history(
    rt: Reader,
    execution_id: str,
    after_seq: int = 0,
    limit: int | None = None,
    *,
    follow: bool = True,
) -> list[EventRecord]:
    """The events of one run (after `after_seq`, at most `limit`) as they may be shown:
    rendered inputs through their kind's `redact`. A chain's live (or last) run unless
    `follow` is False."""
    record = live(rt, execution_id) if follow else load(rt, execution_id)
    events = rt.store.history(record.id, after_seq, limit, tenant=rt.tenant)
    return shown_events(rt.outline(record.definition_hash), events)


def logs(
    rt: Reader, execution_id: str, after_seq: int = 0, *, follow: bool = True
) -> tuple[list[dict[str, Any]], int, bool]:
    """The attempts of one run (a chain's live or last one unless `follow` is False)
    that logged or failed, ended after `after_seq` (see `wovyr.engine.attempts`); with
    the last seq read (pass it back to follow on) and whether the run has finished."""
    record = live(rt, execution_id) if follow else load(rt, execution_id)
    events = rt.store.history(record.id, after_seq, tenant=rt.tenant)
    last = events[-1].seq if events else after_seq
    return attempt_entries(events), last, record.status in ExecutionStatus.TERMINAL


def execution_view(rt: Reader, record: ExecutionRecord, state: ExecutionState) -> ExecutionView:
    view = build_view(rt.outline(record.definition_hash), record, state)
    if view.concurrency is not None:  # who holds the key's slots and who waits (a read)
        slots = rt.store.slot_state(record.tenant, str(view.concurrency["key"]))
        concurrency = {**view.concurrency, "holders": slots.holders, "waiting": slots.waiting}
        view = replace(view, concurrency=concurrency)
    return view
