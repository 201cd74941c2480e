"""`RemoteBackend`: the `workflows`, `schedules` and `definitions` commands over a server's
HTTP API (`wovyr --server URL`, or `WOVYR_SERVER`; the key from `WOVYR_API_KEY`).

It answers in the shapes `LocalBackend` does: the API's RFC 3339 times become the ones the
local commands print, the API's pages are read through to the limit the command was given,
and a refused document comes back as the `DefinitionError` (located in the file) a local
apply raises. The key decides the tenant; who approves is the key's actor.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any, Self, Unpack

import click

from wovyr.cli.target import LISTED, Decision, ExecutionFilter, Remote, Rerun, WatchMessage
from wovyr.client import Client
from wovyr.errors import (
    Conflict,
    DefinitionConflict,
    DefinitionError,
    InputError,
    Problem,
    RequestInvalid,
)

__all__ = ["OverClient", "RemoteBackend", "apply_file"]

_PAGE = 200  # the API's largest page of executions
_EVENTS = 1000  # ... and of events


def _time(value: Any) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) else None


def _iso(value: Any) -> Any:
    """An API time as the local commands print it (`+00:00`, not `Z`)."""
    parsed = _time(value)
    return parsed.isoformat() if parsed is not None else value


def _listed(r: Mapping[str, Any]) -> dict[str, Any]:
    """A listed execution as `workflows list --json` prints it (times as the local store's)."""
    times = {"created_at": _iso(r["created_at"]), "updated_at": _iso(r["updated_at"])}
    return {k: r[k] for k in LISTED} | times | {"labels": dict(r["labels"])}


def _view(detail: Any, client: Client) -> dict[str, Any]:
    """An ExecutionDetail as the engine's view: without the timeline, and with every item
    of its `for_each` activities (a detail holds as many as its page does: the rest are
    read page by page)."""
    view = dict(detail)
    view.pop("timeline", None)
    activities = dict(view.get("activities") or {})
    for key, paged in activities.items():
        if "items_total" not in paged:
            continue
        act = {k: v for k, v in paged.items() if k not in ("items_total", "items_next")}
        items, start = list(act["items"] or []), paged.get("items_next")
        while start is not None:
            page = client.get_items(view["id"], key, start=start, follow=False)
            items.extend(page["items"])
            start = page["next_start"] if page["items"] else None
        activities[key] = {**act, "items": items}
    view["activities"] = activities
    return view


def _schedule(data: Any) -> dict[str, Any]:
    out = dict(data)
    for key in ("start_at", "end_at", "next_fire_at", "last_fire_at"):
        out[key] = _time(out[key])
    out["next_fire_times"] = [_iso(t) for t in out["next_fire_times"]]
    out.pop("created_at", None)  # the local commands do not print these
    out.pop("updated_at", None)
    return out


def _located(problems: list[Problem], file: Path) -> list[Problem]:
    """The server parsed the text it was sent: its problems are in `file`."""
    return [replace(p, file=str(file)) if p.file in ("", "<input>") else p for p in problems]


def apply_file(file: Path, send: Callable[[str], Mapping[str, Any]]) -> tuple[str, str, str, str]:
    """Send the document in `file` to be applied (`send`: the client's apply of a
    definition or of an agent): (outcome, hash, name, version), or the `DefinitionError`
    located in the file, or the `DefinitionConflict`, a local apply raises."""
    try:
        text = Path(file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DefinitionError([Problem(f"cannot read the file: {exc}", file=str(file))]) from None
    try:
        applied = send(text)
    except RequestInvalid as exc:
        if exc.problems:
            raise DefinitionError(_located(exc.problems, file)) from None
        raise InputError([Problem(exc.message, file=str(file))]) from None
    except Conflict as exc:
        raise DefinitionConflict(exc.message) from None
    return applied["result"], applied["hash"], applied["name"], applied["version"]


class OverClient:
    """Commands over `wovyr.client.Client`, to the server `open` is given."""

    def __init__(self, client: Client) -> None:
        self.client = client

    @classmethod
    @contextmanager
    def open(cls, remote: Remote) -> Iterator[Self]:
        with Client(remote.url, api_key=remote.api_key) as client:
            yield cls(client)


class RemoteBackend(OverClient):
    """The commands over `wovyr.client.Client`."""

    # workflows

    def list_executions(
        self, *, limit: int, cursor: str | None, **selected: Unpack[ExecutionFilter]
    ) -> tuple[list[dict[str, Any]], str | None]:
        items: list[dict[str, Any]] = []
        while True:
            try:
                page = self.client.list_workflows(
                    limit=min(_PAGE, limit - len(items)), cursor=cursor, **selected
                )
            except RequestInvalid as exc:
                if any(p.path.endswith("cursor") for p in exc.problems):
                    raise click.BadParameter(
                        "not a cursor printed by a previous page", param_hint="--cursor"
                    ) from None
                raise
            items.extend(_listed(r) for r in page["items"])
            cursor = page["next_cursor"]
            if cursor is None or len(items) >= limit:
                return items, cursor

    def execution(self, execution_id: str, *, follow: bool) -> dict[str, Any]:
        return _view(self.client.get_workflow(execution_id, events=0, follow=follow), self.client)

    def history(
        self, execution_id: str, after: int, limit: int | None, *, follow: bool
    ) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        position: int | None = after
        while position is not None and (limit is None or len(out) < limit):
            want = _EVENTS if limit is None else min(_EVENTS, limit - len(out))
            page = self.client.get_history(
                execution_id, after_seq=position, limit=want, follow=follow
            )
            out.extend({**e, "at": _iso(e["at"])} for e in page["items"])
            position = page["next_after_seq"] if page["items"] else None
        return out

    def logs(
        self, execution_id: str, after: int, *, follow: bool
    ) -> tuple[list[dict[str, Any]], int, bool]:
        page = self.client.get_logs(execution_id, after_seq=after, follow=follow)
        return page["items"], page["next_after_seq"], page["finished"]

    def watch(
        self, execution_id: str, after: str | None, interval: float
    ) -> Iterator[WatchMessage]:
        try:
            for message in self.client.stream_workflow(execution_id, after=after):
                yield message.id, message.event, message.data
        except RequestInvalid as exc:
            raise click.BadParameter(exc.message, param_hint="--after") from None

    def signal(self, execution_id: str, name: str, payload: Any) -> dict[str, Any]:
        return _view(self.client.signal_workflow(execution_id, name, payload), self.client)

    def query(self, execution_id: str, name: str, args: dict[str, Any]) -> Any:
        return self.client.query_workflow(execution_id, name, args)["result"]

    def approve(
        self, execution_id: str, activity_id: str, approved: bool, **decision: Unpack[Decision]
    ) -> dict[str, Any]:
        if decision["by"] is not None:
            raise click.UsageError(
                "--by is for the local store: through a server, the API key's name is "
                "recorded as who decides"
            )
        grant = decision["grant"] or {}
        detail = self.client.approve_workflow(
            execution_id,
            activity_id,
            approved=approved,
            comment=decision["comment"],
            grant_tokens=grant.get("tokens"),
            grant_cost=grant.get("cost"),
        )
        return _view(detail, self.client)

    def cancel(self, execution_id: str, reason: str | None) -> dict[str, Any]:
        return _view(self.client.cancel_workflow(execution_id, reason=reason), self.client)

    def rerun(self, execution_id: str, **how: Unpack[Rerun]) -> dict[str, Any]:
        detail = self.client.rerun_workflow(
            execution_id,
            start_from=how["start_from"],
            input=how["input"],
            latest=how["latest"],
            id=how["new_id"],
        )
        return _view(detail, self.client)

    # schedules

    def create_schedule(
        self, schedule_id: str, *, workflow: str | None, file: Path | None, **spec: Any
    ) -> dict[str, Any]:
        definition = None
        if file is not None:
            try:
                definition = Path(file).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                problem = Problem(f"cannot read the file: {exc}", file=str(file))
                raise DefinitionError([problem]) from None
        record = self.client.create_schedule(
            schedule_id, workflow=workflow, definition=definition, **spec
        )
        return _schedule(record)

    def schedules(self) -> list[dict[str, Any]]:
        return [_schedule(s) for s in self.client.list_schedules()["items"]]

    def schedule(self, schedule_id: str) -> dict[str, Any]:
        return _schedule(self.client.get_schedule(schedule_id))

    def pause_schedule(self, schedule_id: str, note: str | None) -> dict[str, Any]:
        return _schedule(self.client.pause_schedule(schedule_id, note))

    def resume_schedule(self, schedule_id: str, note: str | None) -> dict[str, Any]:
        return _schedule(self.client.resume_schedule(schedule_id, note))

    def update_schedule(self, schedule_id: str, **changes: Any) -> dict[str, Any]:
        return _schedule(self.client.update_schedule(schedule_id, **changes))

    def delete_schedule(self, schedule_id: str) -> None:
        self.client.delete_schedule(schedule_id)

    def trigger_schedule(self, schedule_id: str) -> str:
        return self.client.trigger_schedule(schedule_id)["execution_id"]

    def backfill_schedule(self, schedule_id: str, start: datetime, end: datetime) -> list[str]:
        return self.client.backfill_schedule(schedule_id, start, end)["execution_ids"]

    # definitions

    def apply_definition(self, file: Path, *, revise: bool = False) -> tuple[str, str, str, str]:
        assert not revise  # refused before: development revisions are a local store's
        return apply_file(file, self.client.apply_definition)

    def definitions(self) -> list[dict[str, Any]]:
        return [{**d, "applied_at": _iso(d["applied_at"])} for d in self.client.list_definitions()]

    def definition(self, name: str, version: str | None) -> dict[str, Any]:
        found = self.client.get_definition(name, version)
        return {
            "name": found["name"],
            "version": found["version"],
            "hash": found["hash"],
            "definition": found["definition"],
        }
