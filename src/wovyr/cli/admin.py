"""The `wovyr admin` group (administration on the server host; its other commands add
themselves from their own modules, see `wovyr.cli.main`), with its keys: the API keys
(`wovyr admin keys create|list|revoke`) and the web UI's session key."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from wovyr.cli.backend import refuse_remote, store_or_server, store_or_server_for
from wovyr.cli.common import (
    echo_json,
    echo_listing,
    echo_result,
    engine_options,
    json_option,
    local_actor,
    open_engine,
)
from wovyr.cli.main import cli
from wovyr.platform.auth import METRICS_ROLE, ROLES, Authenticator
from wovyr.settings import Settings
from wovyr.store.platform import ApiKeyRecord

if TYPE_CHECKING:
    pass

__all__ = ["admin"]


# what of `wovyr admin` only the server's host does: its keys, files and whole store
_HOST_ONLY = {
    "kms": "the KMS's root key is the host's",
    "backup": "a backup is of the host's store and files",
    "restore": "a restore replaces the host's store",
}


@cli.group("admin")
@click.pass_context
def admin(ctx: click.Context) -> None:
    """Administration on the server host: API keys, tenants' policies and quotas, the KMS, the
    audit chain, backups, rate limits, retention."""
    why = _HOST_ONLY.get(ctx.invoked_subcommand or "")
    if why is not None:
        refuse_remote(f"admin {ctx.invoked_subcommand}", why)


@admin.group("keys")
def keys() -> None:
    """Create, list and revoke API keys (each bound to a tenant and a role). Through a server
    (`--server`), an admin key manages its own tenant's."""


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
@click.option(
    "--role",
    type=click.Choice((*ROLES, METRICS_ROLE)),
    required=True,
    help="metrics: a scrape key that reads /metrics of every tenant and nothing else.",
)
@click.option("--name", default="", help="A label, e.g. who holds the key.")
@json_option
@engine_options
def create_command(tenant: str, role: str, name: str, as_json: bool, settings: Settings) -> None:
    """Create a key; its token is printed once and never stored."""

    key_id, token = store_or_server_for(
        settings,
        tenant,
        lambda engine: Authenticator(engine.store).create_key(
            tenant, role, name, actor=engine.actor
        ),
        lambda api: api.create_key(role, name),
    )
    if as_json:
        echo_json({"id": key_id, "tenant": tenant, "role": role, "name": name, "token": token})
        return
    click.echo(f"created {key_id} ({role} of tenant {tenant}); the key, shown this once:")
    click.echo(token)


@keys.command("list")
@click.option("--tenant", help="Only this tenant's keys.")
@json_option
@engine_options
def list_command(tenant: str | None, as_json: bool, settings: Settings) -> None:
    """List keys (never their tokens)."""
    records = store_or_server_for(
        settings,
        tenant,
        lambda engine: Authenticator(engine.store).list_keys(tenant),
        lambda api: api.keys(),
    )
    rows = (
        (
            k.id,
            k.tenant,
            k.role,
            k.name,
            k.prefix + "…",
            k.created_at.strftime("%Y-%m-%d %H:%M"),
            k.last_used_at.strftime("%Y-%m-%d %H:%M") if k.last_used_at else "-",
            "revoked" if k.revoked_at else "active",
        )
        for k in records
    )
    columns = ("id", "tenant", "role", "name", "prefix", "created", "last used", "state")
    echo_listing(as_json, [_key_dict(k) for k in records], columns, rows, no_wrap=("id",))


@keys.command("revoke")
@click.argument("key_id")
@json_option
@engine_options
def revoke_command(key_id: str, as_json: bool, settings: Settings) -> None:
    """Revoke a key: requests with it are refused (401) from now on."""
    store_or_server(
        settings,
        lambda engine: Authenticator(engine.store).revoke(key_id, actor=engine.actor),
        lambda api: api.revoke_key(key_id),
    )
    echo_result(as_json, {"id": key_id, "revoked": True}, f"{key_id} revoked")


@admin.command("rotate-session-key")
@json_option
@engine_options
def rotate_session_key_command(as_json: bool, settings: Settings) -> None:
    """Replace the web UI's session-signing key (WOVYR_HOME/ui-session.key): every UI
    session ends and everyone signs in again. Running servers that read this home pick the
    new key up at their next request; servers on other hosts have their own file: run it
    there too. Audited as `ui.session_key_rotate`."""
    from wovyr.platform.kms import HOST_TENANT
    from wovyr.server.ui.session import SECRET_FILE, rotate_secret
    from wovyr.store.audit import AuditEntry

    rotate_secret(settings.home)
    with open_engine(settings, load_activities=False) as engine:
        entry = AuditEntry(
            engine.clock.now(), HOST_TENANT, local_actor(), "ui.session_key_rotate", SECRET_FILE
        )
        engine.store.append_audit(entry)
    path = settings.home / SECRET_FILE
    if as_json:
        echo_json({"rotated": True, "file": str(path)})
        return
    click.echo(f"rotated {path}: every web UI session has ended")
