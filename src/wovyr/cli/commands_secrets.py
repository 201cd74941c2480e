"""`wovyr secrets set|list|delete`: a tenant's secrets, on the store directly or through a
server (`--server`, an admin key: its tenant's).

A value is never a command-line argument (it would land in the shell's history and in
`ps`): `set` reads it from standard input (typed without echo at a terminal) or from
`--from-file`; one trailing newline is dropped (`echo "$KEY" | wovyr secrets set NAME`).
`list` shows names, versions and times, never values: nothing here prints one.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from wovyr.cli.backend import with_tenant
from wovyr.cli.common import echo_result, json_option, tenant_options
from wovyr.cli.main import cli
from wovyr.cli.named import listing_command, removal_command
from wovyr.errors import InputError, Problem
from wovyr.platform.secrets import SecretInfo, Secrets, check_secret_name
from wovyr.settings import Settings

if TYPE_CHECKING:
    from wovyr.engine.engine import Engine

__all__: list[str] = []


@cli.group("secrets")
def secrets_group() -> None:
    """Tenants' secrets: set, list, delete (values are never shown)."""


def _secrets(engine: object) -> Secrets:
    found = getattr(engine, "secrets", None)
    assert isinstance(found, Secrets)
    return found


def _read_value(from_file: Path | None) -> str:
    if from_file is not None:
        try:
            raw = from_file.read_bytes()
        except OSError as exc:
            raise InputError(
                [Problem(f"cannot read {from_file}: {exc.strerror or exc}", path="--from-file")]
            ) from None
    elif sys.stdin.isatty():
        raw = click.prompt("value", hide_input=True, err=True).encode("utf-8")
    else:
        raw = sys.stdin.buffer.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError([Problem("a secret's value must be UTF-8 text", path="value")]) from None
    if text.endswith("\r\n"):
        return text[:-2]
    return text[:-1] if text.endswith("\n") else text


_COLUMNS = ("name", "version", "updated (UTC)", "by")


def _row(info: SecretInfo) -> tuple[str, str, str, str]:
    return (
        info.name,
        str(info.version),
        f"{info.updated_at:%Y-%m-%d %H:%M:%S}",
        info.updated_by,
    )


@secrets_group.command("set")
@click.argument("name")
@click.option(
    "--from-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Read the value from this file (default: standard input).",
)
@json_option
@tenant_options
def set_command(name: str, from_file: Path | None, as_json: bool, settings: Settings) -> None:
    """Set secret NAME of the tenant to the value read from standard input (or
    --from-file); a new version replaces the old. Definitions read it as
    ${{ secrets.NAME }}."""
    check_secret_name(name, "NAME")
    value = _read_value(from_file)
    info, tenant = with_tenant(
        settings,
        lambda engine: _secrets(engine).set_secret(
            engine.tenant, name, value, by="cli", at=engine.clock.now(), actor=engine.actor
        ),
        lambda api: api.set_secret(name, value),
    )
    echo_result(
        as_json, info.to_dict(), f"secret {info.name} of tenant {tenant}: version {info.version}"
    )


@listing_command(secrets_group, _COLUMNS, _row, lambda api: api.list_secrets())
def list_command(engine: Engine) -> list[SecretInfo]:
    """The tenant's secrets: names, versions and times (never values)."""
    return _secrets(engine).list_secrets(engine.tenant)


@removal_command(
    secrets_group, "delete", "secret", check_secret_name, lambda api, name: api.delete_secret(name)
)
def delete_command(engine: Engine, name: str) -> None:
    """Delete secret NAME of the tenant (steps that reference it then fail, not retried)."""
    _secrets(engine).delete_secret(
        engine.tenant, name, by="cli", at=engine.clock.now(), actor=engine.actor
    )
