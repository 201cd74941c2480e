"""The seam between the commands and what they act on: the engine over this host's database
(`LocalBackend`), or a server's HTTP API through `wovyr.client` (`wovyr.cli.remote.
RemoteBackend` for the `workflows`, `schedules` and `definitions` commands, `wovyr.cli.
remote_platform.RemotePlatform` for the tenant's platform commands, `store_or_server`),
with `--server URL` or `WOVYR_SERVER`.

Both answer in the same shapes, the ones the commands print with `--json` (times as the
local commands have always printed them), so a command renders one way whichever answers,
and exits with the same codes: a missing object is `NotFound` from either side.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, Unpack

import click

from wovyr.cli.target import (
    API_KEY_ENV,
    LISTED,
    Decision,
    ExecutionFilter,
    Remote,
    Rerun,
    WatchMessage,
    refuse_remote,
    remote_of,
)
from wovyr.settings import Settings

if TYPE_CHECKING:
    from wovyr.cli.remote_platform import RemotePlatform
    from wovyr.engine.engine import Engine
    from wovyr.engine.reads import StoreReader
    from wovyr.scheduling.schedules import Schedules
    from wovyr.store.schedules import ScheduleRecord

__all__ = [
    "API_KEY_ENV",
    "LISTED",
    "Backend",
    "Decision",
    "ExecutionFilter",
    "LocalBackend",
    "Remote",
    "Rerun",
    "WatchMessage",
    "open_backend",
    "refuse_remote",
    "remote_of",
    "server_for",
    "store_or_server",
    "store_or_server_for",
    "with_tenant",
]

T = TypeVar("T")


class Backend(Protocol):
    """What the commands ask; dicts are the `--json` shapes."""

    # workflows
    def list_executions(
        self, *, limit: int, cursor: str | None, **selected: Unpack[ExecutionFilter]
    ) -> tuple[list[dict[str, Any]], str | None]: ...
    def execution(self, execution_id: str, *, follow: bool) -> dict[str, Any]: ...
    def history(
        self, execution_id: str, after: int, limit: int | None, *, follow: bool
    ) -> list[dict[str, Any]]: ...
    def logs(
        self, execution_id: str, after: int, *, follow: bool
    ) -> tuple[list[dict[str, Any]], int, bool]: ...
    def watch(
        self, execution_id: str, after: str | None, interval: float
    ) -> Iterator[WatchMessage]: ...
    def signal(self, execution_id: str, name: str, payload: Any) -> dict[str, Any]: ...
    def query(self, execution_id: str, name: str, args: dict[str, Any]) -> Any: ...
    def approve(
        self, execution_id: str, activity_id: str, approved: bool, **decision: Unpack[Decision]
    ) -> dict[str, Any]: ...
    def cancel(self, execution_id: str, reason: str | None) -> dict[str, Any]: ...
    def rerun(self, execution_id: str, **how: Unpack[Rerun]) -> dict[str, Any]: ...

    # schedules
    def create_schedule(
        self, schedule_id: str, *, workflow: str | None, file: Path | None, **spec: Any
    ) -> dict[str, Any]: ...
    def schedules(self) -> list[dict[str, Any]]: ...
    def schedule(self, schedule_id: str) -> dict[str, Any]: ...
    def pause_schedule(self, schedule_id: str, note: str | None) -> dict[str, Any]: ...
    def resume_schedule(self, schedule_id: str, note: str | None) -> dict[str, Any]: ...
    def update_schedule(self, schedule_id: str, **changes: Any) -> dict[str, Any]: ...
    def delete_schedule(self, schedule_id: str) -> None: ...
    def trigger_schedule(self, schedule_id: str) -> str: ...
    def backfill_schedule(self, schedule_id: str, start: datetime, end: datetime) -> list[str]: ...

    # definitions
    def apply_definition(
        self, file: Path, *, revise: bool = False
    ) -> tuple[str, str, str, str]: ...
    def definitions(self) -> list[dict[str, Any]]: ...
    def definition(self, name: str, version: str | None) -> dict[str, Any]: ...


def store_or_server(
    settings: Settings,
    local: Callable[[Engine], T],
    remote: Callable[[RemotePlatform], T],
    *,
    load_activities: bool = False,
) -> T:
    """What a platform command (secrets, providers, MCP servers, agents, bulk actions, a
    tenant's administration) does: `local` over the engine on this host's store, or
    `remote` over the server's API when the CLI was given one (`--server`). Both answer
    in the same shapes, so the command prints one way."""
    found = remote_of()
    if found is not None:
        from wovyr.cli.remote_platform import RemotePlatform  # httpx loads only here

        with RemotePlatform.open(found) as platform:
            return remote(platform)
    from wovyr.cli.common import open_engine

    with open_engine(settings, load_activities=load_activities) as engine:
        return local(engine)


def store_or_server_for(
    settings: Settings,
    tenant: str | None,
    local: Callable[[Engine], T],
    remote: Callable[[RemotePlatform], T],
) -> T:
    """`store_or_server` for a command naming `tenant` (None: every one): through a server,
    the key's tenant must be that one."""

    def checked(api: RemotePlatform) -> T:
        if tenant is not None:
            api.check_tenant(tenant)
        return remote(api)

    return store_or_server(settings, local, checked)


def server_for(settings: Settings, tenant: str, remote: Callable[[RemotePlatform], T]) -> T:
    """What a command does through the server it was given (`remote_of()` is set), for
    `tenant` (the key's)."""

    def never_local(engine: Engine) -> T:  # pragma: no cover - only called with a server
        raise AssertionError("the host's path opens the store itself")

    return store_or_server_for(settings, tenant, never_local, remote)


def with_tenant(
    settings: Settings,
    local: Callable[[Engine], T],
    remote: Callable[[RemotePlatform], T],
) -> tuple[T, str]:
    """`store_or_server`, answering also the tenant acted for (through a server, the key's)."""
    return store_or_server(
        settings,
        lambda engine: (local(engine), engine.tenant),
        lambda api: (remote(api), api.tenant),
    )


@contextmanager
def open_backend(settings: Settings) -> Iterator[Backend]:
    """The server's API when the CLI was given one, else this host's store (read through
    `wovyr.engine.reads` alone, the engine opened for what changes)."""
    remote = remote_of()
    if remote is not None:
        from wovyr.cli.remote import RemoteBackend  # httpx loads only here

        with RemoteBackend.open(remote) as backend:
            yield backend
        return
    with ExitStack() as opened:
        yield LocalBackend(settings, opened)


# --- the engine over this host's store ----------------------------------------------------------


def schedule_dict(record: ScheduleRecord, service: Schedules) -> dict[str, Any]:
    from wovyr.scheduling.schedules import spec_of

    return {
        "id": record.id,
        "workflow": record.workflow,
        "definition_hash": record.definition_hash,
        "spec": record.spec,
        "describe": spec_of(record).describe(),
        "overlap": record.overlap,
        "catchup_window": record.catchup_window,
        "paused": record.paused,
        "note": record.note,
        "input": record.input,
        "start_at": record.start_at,
        "end_at": record.end_at,
        "remaining_actions": record.remaining_actions,
        "next_fire_at": record.next_fire_at,
        "next_fire_times": [t.isoformat() for t in service.next_fire_times(record)],
        "last_fire_at": record.last_fire_at,
        "buffered": list(record.buffered),
        "recent": list(record.recent),
        "fired": record.fired_count,
        "skipped": record.skipped_count,
        "missed": record.missed_count,
    }


class LocalBackend:
    """The commands over this host's store (any tenant, `--tenant`): reads go through the
    store alone (`reader`: `wovyr workflows show|list|history` import neither the engine nor
    the workflow language), the rest through the engine (`engine`). Each is opened when
    first used and closed with `opened`."""

    def __init__(self, settings: Settings, opened: ExitStack) -> None:
        self.settings = settings
        self.opened = opened

    @cached_property
    def reader(self) -> StoreReader:
        from wovyr.assemble import open_reader

        reader = open_reader(self.settings)
        self.opened.callback(reader.store.close)
        return reader

    @cached_property
    def engine(self) -> Engine:
        from wovyr.cli.common import open_engine

        return self.opened.enter_context(open_engine(self.settings, load_activities=False))

    # workflows

    def list_executions(
        self, *, limit: int, cursor: str | None, **selected: Unpack[ExecutionFilter]
    ) -> tuple[list[dict[str, Any]], str | None]:
        from wovyr.store.codec import from_micros, to_micros

        position = None
        if cursor:
            try:
                micros, _, ident = cursor.partition(":")
                position = from_micros(int(micros)), ident
            except ValueError:
                raise click.BadParameter(
                    "not a cursor printed by a previous page", param_hint="--cursor"
                ) from None
        from wovyr.engine.reads import list_executions

        page = list_executions(self.reader, limit=limit, cursor=position, **selected)
        after = page.next_cursor
        items = [
            {k: getattr(r, k) for k in LISTED}
            | {
                "status": r.shown_status,
                "created_at": r.created_at.isoformat(),
                "updated_at": r.updated_at.isoformat(),
                "labels": dict(r.labels),
            }
            for r in page.items
        ]
        return items, (f"{to_micros(after[0])}:{after[1]}" if after else None)

    def execution(self, execution_id: str, *, follow: bool) -> dict[str, Any]:
        from wovyr.engine.reads import query

        return query(self.reader, execution_id, follow=follow).to_dict()

    def history(
        self, execution_id: str, after: int, limit: int | None, *, follow: bool
    ) -> list[dict[str, Any]]:
        from wovyr.engine.reads import history

        events = history(self.reader, execution_id, after, limit, follow=follow)
        return [
            {"seq": e.seq, "type": e.type, "at": e.at.isoformat(), "data": e.data} for e in events
        ]

    def logs(
        self, execution_id: str, after: int, *, follow: bool
    ) -> tuple[list[dict[str, Any]], int, bool]:
        from wovyr.engine.reads import logs

        return logs(self.reader, execution_id, after, follow=follow)

    def watch(
        self, execution_id: str, after: str | None, interval: float
    ) -> Iterator[WatchMessage]:
        import time

        from wovyr.engine.streams import StreamCursor, read_stream_page

        try:
            cursor = StreamCursor.parse(after) if after else StreamCursor()
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--after") from None
        self.engine.get(execution_id)  # not found: exit 4
        while True:
            page = read_stream_page(self.engine.store, self.engine.tenant, execution_id, cursor)
            for message in page.messages:
                cursor = cursor.after(message)
                yield str(cursor), message.kind, message.data
            if page.complete:
                yield str(cursor), "end", {"status": page.status}
                return
            if not page.messages:
                time.sleep(interval)

    def signal(self, execution_id: str, name: str, payload: Any) -> dict[str, Any]:
        return self.engine.signal(execution_id, name, payload).to_dict()

    def query(self, execution_id: str, name: str, args: dict[str, Any]) -> Any:
        from wovyr.assemble import load_activities
        from wovyr.code.workflow import answer_query
        from wovyr.engine.core.state import state_from_json

        load_activities(self.settings)  # the module registering the function (-a)
        engine = self.engine
        record = engine.get(execution_id)
        stored = engine.definition(record.definition_hash)
        state = state_from_json(record.checkpoint or {})
        return answer_query(stored, state, name, args, engine.clock.now())

    def approve(
        self, execution_id: str, activity_id: str, approved: bool, **decision: Unpack[Decision]
    ) -> dict[str, Any]:
        if decision["by"] is None:
            self._require_by(execution_id, activity_id)
        return self.engine.approve(execution_id, activity_id, approved, **decision).to_dict()

    def _require_by(self, execution_id: str, activity_id: str) -> None:
        """An approval that names its approvers needs --by: say so, with who may decide."""
        from wovyr.activities.builtin.wait import WaitStep

        engine = self.engine
        workflow = engine.definition(engine.get(execution_id).definition_hash)
        try:
            step = workflow.activity(activity_id).step_of(WaitStep)
        except KeyError:
            return  # the engine answers: no such activity
        approval = step.wait.approval if step is not None else None
        if approval is not None and approval.approvers:
            raise click.UsageError(
                f"approval {activity_id!r} of {execution_id} may be decided only by "
                f"{', '.join(approval.approvers)}: say who decides with --by NAME"
            )

    def cancel(self, execution_id: str, reason: str | None) -> dict[str, Any]:
        return self.engine.cancel(execution_id, reason).to_dict()

    def rerun(self, execution_id: str, **how: Unpack[Rerun]) -> dict[str, Any]:
        record = self.engine.rerun(execution_id, **how)
        return self.engine.query(record.id, follow=False).to_dict()

    # schedules

    def _schedules(self) -> Schedules:
        from wovyr.scheduling.schedules import Schedules

        return Schedules(self.engine)

    def create_schedule(
        self, schedule_id: str, *, workflow: str | None, file: Path | None, **spec: Any
    ) -> dict[str, Any]:
        service = self._schedules()
        target = Path(file) if file is not None else workflow
        return schedule_dict(service.create(schedule_id, workflow=target, **spec), service)

    def schedules(self) -> list[dict[str, Any]]:
        service = self._schedules()
        return [schedule_dict(r, service) for r in service.list()]

    def schedule(self, schedule_id: str) -> dict[str, Any]:
        service = self._schedules()
        return schedule_dict(service.get(schedule_id), service)

    def pause_schedule(self, schedule_id: str, note: str | None) -> dict[str, Any]:
        service = self._schedules()
        return schedule_dict(service.pause(schedule_id, note), service)

    def resume_schedule(self, schedule_id: str, note: str | None) -> dict[str, Any]:
        service = self._schedules()
        return schedule_dict(service.resume(schedule_id, note), service)

    def update_schedule(self, schedule_id: str, **changes: Any) -> dict[str, Any]:
        service = self._schedules()
        return schedule_dict(service.update(schedule_id, **changes), service)

    def delete_schedule(self, schedule_id: str) -> None:
        self._schedules().delete(schedule_id)

    def trigger_schedule(self, schedule_id: str) -> str:
        return self._schedules().trigger(schedule_id)

    def backfill_schedule(self, schedule_id: str, start: datetime, end: datetime) -> list[str]:
        return self._schedules().backfill(schedule_id, start, end)

    # definitions

    def apply_definition(self, file: Path, *, revise: bool = False) -> tuple[str, str, str, str]:
        outcome, digest = self.engine.apply(file, revise=revise)
        workflow = self.engine.definition(digest)
        return outcome, digest, workflow.name, workflow.version

    def definitions(self) -> list[dict[str, Any]]:
        records = self.engine.store.list_registered(self.engine.tenant)
        return [
            {
                "name": r.name,
                "version": r.version,
                "hash": r.hash,
                "applied_at": r.created_at.isoformat(),
            }
            for r in records
        ]

    def definition(self, name: str, version: str | None) -> dict[str, Any]:
        workflow, digest = self.engine.named(name, version)
        data = workflow.model_dump(by_alias=True, mode="json", exclude_defaults=True)
        return {
            "name": workflow.name,
            "version": workflow.version,
            "hash": digest,
            "definition": data,
        }
