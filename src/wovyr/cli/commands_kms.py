"""`wovyr admin kms status|escrowed|rotate`: the root key that wraps tenants' data keys.

- `status`: the mode (production: `WOVYR_KMS_ROOT_KEY`; development: a key file under
  `WOVYR_HOME`), the root key's id (never the key), when its escrow was acknowledged, when
  a rotation last completed onto it, and how many data keys each root key wraps.
- `escrowed`: records that the root key in use has been escrowed (copied somewhere safe,
  apart from the database): a mandatory production step (docs/security.md).
- `rotate`: re-wraps every data key under a new root key. In production the new key is
  given in `WOVYR_KMS_NEW_ROOT_KEY` (or `--new-key-file`); every process that reads
  secrets during the rotation should have it too (they then read data keys under either
  key). In development a new key is generated into `kms-root.key.next`, and replaces
  `kms-root.key` when done. Killed at any point, run it again: it finishes the job.
"""

from __future__ import annotations

from pathlib import Path

import click

from wovyr.cli.admin import admin
from wovyr.cli.common import echo_json, engine_options, json_option, open_engine
from wovyr.errors import KmsError
from wovyr.platform.kms import (
    NEW_ROOT_ENV,
    ROOT_ENV,
    RootKey,
    kms_status,
    load_kms,
    parse_root_key,
    record_escrow,
    rotate,
    rotate_development,
)
from wovyr.settings import Settings, read
from wovyr.store.secrets import DataKeyRecord

__all__: list[str] = []


@admin.group("kms")
def kms_group() -> None:
    """The KMS root key: status, escrow acknowledgement, rotation."""


@kms_group.command("status")
@json_option
@engine_options
def status_command(as_json: bool, settings: Settings) -> None:
    """The KMS mode, the root key's id (never the key) and its escrow and rotation times."""
    kms = load_kms(settings.home)
    with open_engine(settings, load_activities=False) as engine:
        kms.register(engine.store, engine.clock.now())
        status = kms_status(kms, engine.store).to_dict()
    if as_json:
        echo_json(status)
        return
    for name, value in status.items():
        shown = "-" if value is None else value
        if name == "data_keys":
            shown = ", ".join(f"{n} under {k}" for k, n in value.items()) or "none yet"
        click.echo(f"{name.replace('_', ' ')}: {shown}")
    if status["escrowed_at"] is None:
        click.echo(
            "warning: no escrow of this root key is recorded: copy it somewhere safe, then "
            "run `wovyr admin kms escrowed`",
            err=True,
        )


@kms_group.command("escrowed")
@click.option("--by", default="cli", show_default=True, help="Who escrowed it (recorded).")
@json_option
@engine_options
def escrowed_command(by: str, as_json: bool, settings: Settings) -> None:
    """Record that the root key in use has been escrowed (copied somewhere safe, apart from
    the database and its backups)."""
    kms = load_kms(settings.home, warn=False)
    with open_engine(settings, load_activities=False) as engine:
        record = record_escrow(kms, engine.store, by=by, at=engine.clock.now(), actor=engine.actor)
    assert record.escrowed_at is not None
    if as_json:
        echo_json(
            {"key_id": record.root_id, "escrowed_at": record.escrowed_at.isoformat(), "by": by}
        )
        return
    click.echo(f"root key {record.root_id}: escrow recorded at {record.escrowed_at.isoformat()}")


@kms_group.command("rotate")
@click.option(
    "--new-key-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help=f"A file holding the new root key (64 hex digits); default: {NEW_ROOT_ENV}.",
)
@click.option("--verbose", is_flag=True, help="Print each data key as it is re-wrapped.")
@json_option
@engine_options
def rotate_command(
    new_key_file: Path | None, verbose: bool, as_json: bool, settings: Settings
) -> None:
    """Re-wrap every tenant's data key under a new root key (run it again if it was
    interrupted: it finishes the job)."""
    kms = load_kms(settings.home)

    def step(record: DataKeyRecord) -> None:
        if verbose:
            click.echo(f"re-wrapped tenant {record.tenant} version {record.version}")

    with open_engine(settings, load_activities=False) as engine:
        store, now = engine.store, engine.clock.now()
        kms.register(store, now)
        if kms.mode == "development" and new_key_file is None:
            if verbose:
                click.echo("rotating the development key")
            result = rotate_development(kms, store, at=now, step=step, actor=engine.actor)
        else:
            new = _new_key(new_key_file)
            if verbose:
                click.echo(f"rotating from {kms.key_id} to {new.key_id}")
            result = rotate(kms, store, new, at=now, step=step, actor=engine.actor)
    if as_json:
        echo_json(
            {
                "old_key_id": result.old_key_id,
                "new_key_id": result.new_key_id,
                "rewrapped": result.rewrapped,
                "already": result.already,
            }
        )
        return
    click.echo(
        f"rotated: {result.rewrapped} data keys re-wrapped from {result.old_key_id} to "
        f"{result.new_key_id} ({result.already} were already)"
    )
    if kms.mode == "production":
        click.echo(
            f"next: set {ROOT_ENV} to the new key on every process and remove "
            f"{NEW_ROOT_ENV}; escrow the new key, then `wovyr admin kms escrowed`",
            err=True,
        )


def _new_key(path: Path | None) -> RootKey:
    if path is not None:
        try:
            text = path.read_text(encoding="ascii")
        except (OSError, UnicodeDecodeError) as exc:
            raise KmsError(f"cannot read the new key file {path}: {exc}") from None
        return RootKey(parse_root_key(text, f"the new key file {path}"), str(path))
    given = read(NEW_ROOT_ENV)  # or WOVYR_KMS_NEW_ROOT_KEY_FILE's file
    if not given:
        raise KmsError(
            f"a rotation needs the new root key: set {NEW_ROOT_ENV} (64 hex digits) or "
            "give --new-key-file",
            hint="generate one with: python -c 'import secrets; print(secrets.token_hex(32))'",
        )
    return RootKey(parse_root_key(given, NEW_ROOT_ENV), NEW_ROOT_ENV)
