"""`wovyr mcp add|list|show|remove|serve`: a tenant's MCP servers, and Wovyr as one.

`add` registers a server the tenant's steps may call (`mcp:` steps, an agent's
`mcp:NAME/TOOL` tools): `--command "PROGRAM ARGS"` (stdio: a process on the host, refused
unless the tenant's side-effect policy allows running programs) or `--url URL`
(streamable HTTP, with `--header-secret HEADER=SECRET` to send a secret of the tenant in a
header; the secret's NAME is stored, never a value). Changes are audited as made by the
local user; through a server (`--server`, an admin key), as made by the key, for its tenant.

`serve` speaks MCP on stdin/stdout as the API key in `WOVYR_API_KEY` (its tenant and role),
for MCP clients that start their servers as processes; `--worker` also runs the
executions it starts in this process. The `mcp` SDK is imported only by `serve`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from wovyr.cli.backend import refuse_remote, with_tenant
from wovyr.cli.common import (
    echo_result,
    json_log_config,
    json_option,
    open_engine,
    tenant_options,
)
from wovyr.cli.main import cli
from wovyr.cli.named import listing_command, removal_command, showing_command
from wovyr.errors import ConfigError
from wovyr.platform.mcp import (
    McpServerInfo,
    add_mcp_server,
    audit_details,
    check_server_name,
    list_mcp_servers,
    mcp_server_info,
    parse_mcp_server,
    remove_mcp_server,
)
from wovyr.settings import Settings, read

if TYPE_CHECKING:
    from wovyr.engine.engine import Engine

__all__: list[str] = []


@cli.group("mcp")
def mcp_group() -> None:
    """MCP: the tenant's MCP servers (add, list, show, remove), and Wovyr as one (serve)."""


def _where(info: McpServerInfo) -> str:
    if info.command is not None:
        return " ".join(info.command)
    return info.url or "-"


def _header_secrets(values: tuple[str, ...]) -> dict[str, str]:
    found: dict[str, str] = {}
    for value in values:
        header, sep, secret = value.partition("=")
        if not sep or not header or not secret:
            raise click.BadParameter(
                f"{value!r} is not HEADER=SECRET_NAME", param_hint="--header-secret"
            )
        found[header] = secret
    return found


@mcp_group.command("add")
@click.argument("name")
@click.option("--command", "command", metavar="'PROGRAM ARGS'", help="A stdio server.")
@click.option("--url", metavar="URL", help="A streamable-HTTP server (…/mcp).")
@click.option(
    "--header-secret",
    "header_secrets",
    multiple=True,
    metavar="HEADER=SECRET",
    help="Send the tenant's secret SECRET in header HEADER (repeatable; --url only).",
)
@json_option
@tenant_options
def add_command(
    name: str,
    command: str | None,
    url: str | None,
    header_secrets: tuple[str, ...],
    as_json: bool,
    settings: Settings,
) -> None:
    """Register MCP server NAME for the tenant (replacing one of that name)."""
    check_server_name(name, "NAME")
    if (command is None) == (url is None):
        raise click.UsageError("give either --command (a stdio server) or --url")
    fields: dict[str, object] = {"command": command, "url": url}
    if header_secrets:
        fields["header_secrets"] = _header_secrets(header_secrets)

    def local(engine: Engine) -> McpServerInfo:
        record = parse_mcp_server(
            engine.tenant,
            name,
            fields,
            policy=engine.side_effect_policy(),
            by="cli",
            at=engine.clock.now(),
        )
        info = McpServerInfo.of(record)
        audit = engine.audit_entry("mcp.add", name, audit_details(info))
        add_mcp_server(engine.store, record, audit=audit)
        return info

    info, tenant = with_tenant(settings, local, lambda api: api.add_mcp_server(name, fields))
    echo_result(
        as_json, info.to_dict(), f"MCP server {name} ({info.transport}) of tenant {tenant} added"
    )


def _row(info: McpServerInfo) -> tuple[str, str, str, str]:
    return info.name, info.transport, _where(info), _headers(info) or "-"


_COLUMNS = ("name", "transport", "command / URL", "header secrets")


@listing_command(mcp_group, _COLUMNS, _row, lambda api: api.list_mcp_servers())
def list_command(engine: Engine) -> list[McpServerInfo]:
    """The tenant's MCP servers (secret names, never values)."""
    return list_mcp_servers(engine.store, engine.tenant)


def _headers(info: McpServerInfo) -> str:
    return ", ".join(f"{h}={s}" for h, s in sorted(info.header_secrets.items()))


def _show(info: McpServerInfo, tenant: str) -> None:
    click.echo(f"MCP server {info.name} of tenant {tenant}")
    click.echo(f"  transport: {info.transport}")
    click.echo(f"  {'command' if info.command is not None else 'URL'}: {_where(info)}")
    for header, secret in sorted(info.header_secrets.items()):
        click.echo(f"  header {header}: secret {secret}")
    click.echo(f"  updated:   {info.updated_at:%Y-%m-%d %H:%M:%S} UTC by {info.updated_by}")


@showing_command(mcp_group, check_server_name, lambda api, name: api.mcp_server(name), _show)
def show_command(engine: Engine, name: str) -> McpServerInfo:
    """MCP server NAME of the tenant."""
    return mcp_server_info(engine.store, engine.tenant, name)


@removal_command(
    mcp_group, "remove", "MCP server", check_server_name, lambda api, n: api.remove_mcp_server(n)
)
def remove_command(engine: Engine, name: str) -> None:
    """Remove MCP server NAME of the tenant (steps naming it then fail, not retried)."""
    remove_mcp_server(
        engine.store, engine.tenant, name, audit=engine.audit_entry("mcp.remove", name)
    )


@mcp_group.command("serve")
@click.option(
    "--worker/--no-worker",
    default=False,
    show_default=True,
    help="Also run the executions in this process (else a `wovyr serve` or `wovyr worker` "
    "sharing the store runs them).",
)
@click.option("--json", "as_json", is_flag=True, help="Log JSON lines on stderr.")
@tenant_options
def serve_command(worker: bool, as_json: bool, settings: Settings) -> None:
    """Serve Wovyr's MCP tools on stdin/stdout as the API key in WOVYR_API_KEY (its tenant
    and role; --tenant is not used)."""
    import asyncio
    import importlib.util
    import logging
    import logging.config

    refuse_remote("mcp serve", "it serves this host's store on stdin/stdout")
    if importlib.util.find_spec("mcp") is None:
        raise ConfigError("wovyr mcp serve needs the MCP SDK", hint="pip install 'wovyr[mcp]'")
    from wovyr.server.mcp import build_server, stdio_principal

    # stdout carries the protocol: what the server and its worker notice goes to stderr
    if as_json:
        logging.config.dictConfig(json_log_config())
    else:
        logging.basicConfig(
            level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )

    with open_engine(settings, load_activities=worker) as engine:
        principal = stdio_principal(engine, read("WOVYR_API_KEY"))
        server = build_server(engine, lambda _ctx: principal)

        async def main() -> None:
            if not worker:
                await server.run_stdio_async()
                return
            from wovyr.worker import Worker

            runner = Worker(engine, concurrency=8)
            stop = asyncio.Event()
            working = asyncio.create_task(runner.run(stop))
            try:
                await server.run_stdio_async()  # until the client closes stdin
            finally:
                stop.set()
                await working

        asyncio.run(main())
