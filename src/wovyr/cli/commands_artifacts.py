"""`wovyr artifacts put FILE` and `wovyr artifacts list`: artifacts (`wovyr.engine.artifacts`),
bytes a tenant stores once by content hash and steps reference by digest, on this host's
store or through a server (`--server`).

`put` stores a PNG, JPEG, GIF, WebP or PDF file (its type read from its first bytes unless
`--media-type` says) and prints the content part that sends it to a model (the `ref`, to
paste into an `llm` message's content or an agent's attachments); `list` shows the
tenant's artifacts, newest first, a page at a time (`--cursor`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from wovyr.cli.backend import store_or_server
from wovyr.cli.common import echo_json, tenant_options
from wovyr.cli.main import cli
from wovyr.cli.pages import cursor_position, echo_page, next_cursor, page_options
from wovyr.settings import Settings

if TYPE_CHECKING:
    from wovyr.cli.remote_platform import RemotePlatform
    from wovyr.engine.engine import Engine

__all__: list[str] = []

_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"%PDF-", "application/pdf"),
)


def sniffed_type(data: bytes) -> str | None:
    """The media type the first bytes of `data` say (None: none an artifact may have)."""
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return next((kind for magic, kind in _MAGIC if data.startswith(magic)), None)


@cli.group("artifacts")
def artifacts() -> None:
    """Artifacts: images and PDFs stored once by digest, which content parts reference."""


@artifacts.command("put")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--media-type", help="The file's media type (default: read from its bytes).")
@click.option("--json", "as_json", is_flag=True)
@tenant_options
def put_command(file: Path, media_type: str | None, as_json: bool, settings: Settings) -> None:
    """Store FILE as an artifact; print its ref (the content part that names it)."""
    data = file.read_bytes()
    kind = media_type or sniffed_type(data)
    if kind is None:
        raise click.BadParameter(
            "not a PNG, JPEG, GIF, WebP or PDF file (give --media-type)", param_hint="FILE"
        )

    def local(engine: Engine) -> dict[str, Any]:
        from wovyr.engine.artifacts import artifact_view, put_artifact

        return artifact_view(put_artifact(engine, data, kind)[0])

    def remote(api: RemotePlatform) -> dict[str, Any]:
        return dict(api.client.put_artifact(data, kind))

    stored = store_or_server(settings, local, remote)
    if as_json:
        echo_json(stored)
        return
    click.echo(json.dumps(stored["ref"]))


@artifacts.command("list")
@page_options
@click.option("--json", "as_json", is_flag=True)
@tenant_options
def list_command(limit: int, cursor: str | None, as_json: bool, settings: Settings) -> None:
    """List the tenant's artifacts, newest first."""

    def local(engine: Engine) -> dict[str, Any]:
        from wovyr.engine.artifacts import artifact_view, list_artifacts

        items, after = list_artifacts(engine, before=cursor_position(cursor), limit=limit)
        return {"items": [artifact_view(r) for r in items], "next_cursor": next_cursor(after)}

    def remote(api: RemotePlatform) -> dict[str, Any]:
        return dict(api.client.list_artifacts(limit=limit, cursor=cursor))

    page = store_or_server(settings, local, remote)
    lines = (
        (
            row["digest"],
            row["media_type"],
            str(row["size"]),
            row["created_at"][:19].replace("T", " "),
        )
        for row in page["items"]
    )
    echo_page(as_json, page, ("digest", "type", "size", "created"), lines)
