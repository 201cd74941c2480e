"""The server a command talks to (`--server URL` or `WOVYR_SERVER`, with `WOVYR_API_KEY`),
as the `wovyr` group found it, and what a command that only makes sense on the host does
with one; and the shapes of what the commands ask (`ExecutionFilter`, `Decision`, `Rerun`,
`LISTED`, `WatchMessage`). Both backends (`wovyr.cli.backend`, `wovyr.cli.remote`) build on
it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypedDict

import click

__all__ = [
    "API_KEY_ENV",
    "LISTED",
    "Decision",
    "ExecutionFilter",
    "Remote",
    "Rerun",
    "WatchMessage",
    "refuse_remote",
    "remote_of",
]

API_KEY_ENV = "WOVYR_API_KEY"
WatchMessage = tuple[str, str, dict[str, Any]]  # (position, kind, data) of a live stream


class ExecutionFilter(TypedDict):
    """Which executions `workflows list` shows (`Backend.list_executions`)."""

    workflow: str | None
    status: str | None
    created_after: datetime | None
    created_before: datetime | None
    labels: dict[str, str]
    id_prefix: str | None
    name: str | None


class Decision(TypedDict):
    """Who decides an approval (`--by`, the local store's), why, and the budget it grants."""

    by: str | None
    comment: str | None
    grant: dict[str, Any] | None


class Rerun(TypedDict):
    """How `workflows rerun` reruns an execution."""

    start_from: str | None
    input: dict[str, Any]
    latest: bool
    new_id: str | None


#: The keys of a listed execution, in the order `workflows list --json` prints them.
LISTED = (
    "id",
    "workflow",
    "version",
    "status",
    "created_at",
    "updated_at",
    "waiting_on",
    "parent_id",
    "labels",
)


@dataclass(frozen=True)
class Remote:
    """The server the CLI talks to (`--server`/`WOVYR_SERVER`), and its key."""

    url: str
    api_key: str | None

    def __repr__(self) -> str:  # never the key
        return f"Remote({self.url!r})"


def remote_of(ctx: click.Context | None = None) -> Remote | None:
    """The server this invocation talks to, if any (set by the `wovyr` group)."""
    ctx = ctx or click.get_current_context(silent=True)
    if ctx is None:
        return None
    found = ctx.meta.get("wovyr.remote")
    return found if isinstance(found, Remote) else None


def refuse_remote(command: str, why: str) -> None:
    """A command of a remote-capable group that only makes sense on the host: refused with
    `--server`, never run against a local store instead."""
    if remote_of() is not None:
        raise click.UsageError(
            f"`wovyr {command}` does not go through a server ({why}): run it on the "
            f"server's host without --server (and WOVYR_SERVER)"
        )
