"""`wovyr serve` and `wovyr admin keys create|list|revoke`."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

import click
from rich.table import Table

from wovyr.cli.common import console, echo_json, engine_options, open_engine
from wovyr.cli.main import cli
from wovyr.errors import ConfigError
from wovyr.platform.auth import ROLES, Authenticator
from wovyr.settings import Settings
from wovyr.store.platform import ApiKeyRecord

__all__: list[str] = []


@cli.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(1, 65535), default=8080, show_default=True)
@click.option(
    "--log-level",
    type=click.Choice(["critical", "error", "warning", "info", "debug"]),
    default="info",
    show_default=True,
)
@engine_options
def serve_command(host: str, port: int, log_level: str, settings: Settings) -> None:
    """Run the API, the web UI, the worker and the timer and schedule dispatchers.

    SIGTERM or Ctrl-C stops claiming work, gives in-flight activities a grace period
    (WOVYR_SHUTDOWN_GRACE_SECS), releases leases and exits. The first start on a store with
    no API key prints one admin key for tenant "default", once.
    """
    try:
        import uvicorn

        from wovyr.server import create_app
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ConfigError(
            f"the server needs the server extra: pip install 'wovyr[server]' ({exc})"
        ) from None
    with open_engine(settings) as engine:
        app = create_app(engine, settings)
        token = app.state.authenticator.bootstrap_admin_if_empty()
        if token is not None:
            click.echo(
                "No API key existed: created an admin key for tenant 'default'.\n"
                "It is shown this once; keep it safe:\n\n"
                f"    {token}\n"
            )
            sys.stdout.flush()
        config = uvicorn.Config(
            app,
            host=host,
            port=port,
            log_level=log_level,
            lifespan="on",
            access_log=False,
            timeout_graceful_shutdown=max(1, round(settings.shutdown_grace)),
        )
        _server_class(uvicorn.Server)(config).run()


def _server_class(base: Any) -> Any:
    """uvicorn's Server, except that after a graceful shutdown on SIGTERM/SIGINT the process
    exits normally (code 0, `engine.close()` runs) instead of re-raising the signal."""

    class Server(base):  # type: ignore[misc]
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            handled = (signal.SIGINT, signal.SIGTERM)
            originals = {sig: signal.signal(sig, self.handle_exit) for sig in handled}
            try:
                yield
            finally:
                for sig, handler in originals.items():
                    signal.signal(sig, handler)

    return Server


@cli.group("admin")
def admin() -> None:
    """Administration on the server host: API keys."""


@admin.group("keys")
def keys() -> None:
    """Create, list and revoke API keys (each bound to a tenant and a role)."""


def _key_dict(k: ApiKeyRecord) -> dict[str, Any]:
    return {
        "id": k.id,
        "tenant": k.tenant,
        "role": k.role,
        "name": k.name,
        "prefix": k.prefix,
        "created_at": k.created_at.isoformat(),
        "revoked_at": k.revoked_at.isoformat() if k.revoked_at else None,
        "last_used_at": k.last_used_at.isoformat() if k.last_used_at else None,
    }


@keys.command("create")
@click.option("--tenant", required=True, help="The tenant the key acts for.")
@click.option("--role", type=click.Choice(ROLES), required=True)
@click.option("--name", default="", help="A label, e.g. who holds the key.")
@click.option("--json", "as_json", is_flag=True)
@engine_options
def create_command(tenant: str, role: str, name: str, as_json: bool, settings: Settings) -> None:
    """Create a key; its token is printed once and never stored."""
    with open_engine(settings, load_activities=False) as engine:
        key_id, token = Authenticator(engine.store).create_key(tenant, role, name)
    if as_json:
        echo_json({"id": key_id, "tenant": tenant, "role": role, "name": name, "token": token})
        return
    click.echo(f"created {key_id} ({role} of tenant {tenant}); the key, shown this once:")
    click.echo(token)


@keys.command("list")
@click.option("--tenant", help="Only this tenant's keys.")
@click.option("--json", "as_json", is_flag=True)
@engine_options
def list_command(tenant: str | None, as_json: bool, settings: Settings) -> None:
    """List keys (never their tokens)."""
    with open_engine(settings, load_activities=False) as engine:
        records = Authenticator(engine.store).list_keys(tenant)
    if as_json:
        echo_json([_key_dict(k) for k in records])
        return
    table = Table(box=None, pad_edge=False)
    for column in ("id", "tenant", "role", "name", "prefix", "created", "last used", "state"):
        table.add_column(column, no_wrap=column == "id")
    for k in records:
        table.add_row(
            k.id,
            k.tenant,
            k.role,
            k.name,
            k.prefix + "…",
            k.created_at.strftime("%Y-%m-%d %H:%M"),
            k.last_used_at.strftime("%Y-%m-%d %H:%M") if k.last_used_at else "-",
            "revoked" if k.revoked_at else "active",
        )
    console.print(table)


@keys.command("revoke")
@click.argument("key_id")
@engine_options
def revoke_command(key_id: str, settings: Settings) -> None:
    """Revoke a key: requests with it are refused (401) from now on."""
    with open_engine(settings, load_activities=False) as engine:
        Authenticator(engine.store).revoke(key_id)
    click.echo(f"{key_id} revoked")
