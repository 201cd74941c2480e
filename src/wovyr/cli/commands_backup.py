"""`wovyr admin backup DEST | verify SRC | schedule`, `wovyr admin restore SRC`.

On the server host (whoever runs them holds the store): a backup is a folder with a
consistent snapshot of the store, the home files an installation needs and a manifest of
checksums (`wovyr.platform.backup`). Exit codes: 0 done, 1 refused (a damaged or newer
backup, a wrong root key, a non-empty target without --force), 2 a usage error.

A passphrase (`--encrypt`, and to verify or restore an encrypted backup) is read from
`--passphrase-file` or `WOVYR_BACKUP_PASSPHRASE`, never from the command line; a scheduled
backup reads it when it runs, from the file the schedule names or the worker's
environment. `WOVYR_BACKUP_REQUIRE_ENCRYPTION=1` makes the host take, schedule and restore
encrypted backups only.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from wovyr.cli.admin import admin
from wovyr.cli.common import (
    echo_json,
    engine_options,
    json_option,
    local_actor,
    open_engine,
    store_options,
)
from wovyr.errors import ConfigError, KmsError
from wovyr.platform.backup import (
    BACKUP_WORKFLOW,
    PASSPHRASE_ENV,
    PLATFORM_TENANT,
    REQUIRE_ENCRYPTION_ENV,
    read_passphrase,
    restore_backup,
    take_backup,
    verify_backup,
)
from wovyr.platform.kms import Kms, load_kms
from wovyr.scheduling.backups import create_backup_schedule
from wovyr.scheduling.schedules import Schedules
from wovyr.settings import Settings, read
from wovyr.store import redact_url
from wovyr.store.backends import restorable_url

__all__: list[str] = []


def _passphrase(path: Path | None) -> str | None:
    if path is not None:
        try:
            return read_passphrase(path)
        except (OSError, ConfigError) as exc:
            raise click.BadParameter(str(exc), param_hint="--passphrase-file") from None
    return read(PASSPHRASE_ENV)  # or WOVYR_BACKUP_PASSPHRASE_FILE's file


_passphrase_option = click.option(
    "--passphrase-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help=f"A file holding the backup's passphrase (else env {PASSPHRASE_ENV}).",
)


class _BackupGroup(click.Group):
    """`backup DEST` takes a backup; `backup verify|schedule ...` are subcommands."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("-h", "--help"):
            args = ["take", *args]
        return super().parse_args(ctx, args)


@admin.group("backup", cls=_BackupGroup)
def backup_group() -> None:
    """Back up the installation: `backup DEST` takes one (a consistent snapshot of the
    store while it runs, the home files it needs, a manifest of checksums); `backup verify
    SRC` checks one; `backup schedule` takes them on a schedule. See `wovyr admin restore`."""


def _kms(settings: Settings) -> Kms | None:
    try:
        return load_kms(settings.home, warn=False)
    except KmsError:
        return None


@backup_group.command("take", hidden=True)
@click.argument("dest", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--include-root-key",
    is_flag=True,
    help="Also copy the development KMS root key (the backup then opens every secret).",
)
@click.option("--encrypt", is_flag=True, help="Encrypt the backup with a passphrase.")
@_passphrase_option
@json_option
@store_options
def take_command(
    dest: Path,
    include_root_key: bool,
    encrypt: bool,
    passphrase_file: Path | None,
    as_json: bool,
    settings: Settings,
) -> None:
    """Take a backup into the new folder DEST."""
    passphrase = _passphrase(passphrase_file) if encrypt else None
    if encrypt and not passphrase:
        raise click.UsageError(f"--encrypt needs --passphrase-file or {PASSPHRASE_ENV}")
    kms = _kms(settings)
    with open_engine(settings, load_activities=False) as engine:
        report = take_backup(
            engine.store,
            settings.home,
            dest,
            kms=kms,
            at=datetime.now(UTC),
            include_root_key=include_root_key,
            passphrase=passphrase,
            require_encryption=settings.backup_require_encryption,
        )
    if include_root_key:
        click.echo(
            "warning: this backup holds the KMS root key: it alone opens every secret in it. "
            "Keep it as safe as the key's escrow.",
            err=True,
        )
    if as_json:
        echo_json(report.to_dict())
        return
    data = report.to_dict()
    head = data["audit_head"]
    click.echo(
        f"backup {report.path}: {data['store']['kind']} store, schema "
        f"{data['store']['schema_version']}, {report.bytes} bytes, audit head "
        f"{head['seq'] if head else '-'}{', encrypted' if data['encrypted'] else ''}"
    )
    click.echo(f"root key: {report.manifest.data['kms']['hint']}")


@backup_group.command("verify")
@click.argument("src", type=click.Path(file_okay=False, path_type=Path))
@_passphrase_option
@json_option
@store_options
def verify_command(
    src: Path, passphrase_file: Path | None, as_json: bool, settings: Settings
) -> None:
    """Check the backup SRC: manifest, checksums, the snapshot's integrity, the audit chain."""
    report = verify_backup(
        src,
        passphrase=_passphrase(passphrase_file),
        home=settings.home,
        server=settings.database_url,  # a PostgreSQL dump's audit chain is checked there
    )
    if as_json:
        echo_json(report.to_dict())
        return
    for note in report.notes:
        click.echo(f"note: {note}", err=True)
    audit = (
        f"audit chain OK ({report.audit.records} records)"
        if report.audit.checked
        else "audit chain not checked"
    )
    click.echo(
        f"backup {src} OK: {len(report.manifest.files)} files match the manifest, store "
        f"snapshot sound, {audit}"
    )


@backup_group.command("schedule")
@click.option("--cron", default=None, help='A cron expression, e.g. "0 * * * *".')
@click.option("--every", default=None, help="An interval instead of --cron, e.g. 6h.")
@click.option("--dest", required=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--keep", type=click.IntRange(min=1), default=24, show_default=True)
@click.option("--id", "schedule_id", default="backup", show_default=True)
@click.option(
    "--encrypt",
    is_flag=True,
    help=f"Encrypt every backup; the worker reads the passphrase when it runs, from "
    f"--passphrase-file or its own {PASSPHRASE_ENV}.",
)
@click.option(
    "--passphrase-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="With --encrypt: a file on the worker's host holding the passphrase (the schedule "
    "keeps its path, never the passphrase).",
)
@json_option
@engine_options
def schedule_command(
    cron: str | None,
    every: str | None,
    dest: Path,
    keep: int,
    schedule_id: str,
    encrypt: bool,
    passphrase_file: Path | None,
    as_json: bool,
    settings: Settings,
) -> None:
    """Take backups into DIR on a schedule, keeping the newest --keep: a built-in workflow
    of the platform (its executions' history shows every backup taken). Workers and the
    server run it; `wovyr admin backup schedule` again with another --id adds another."""
    if (cron is None) == (every is None):
        raise click.UsageError("give exactly one of --cron and --every")
    if passphrase_file is not None and not encrypt:
        raise click.UsageError("--passphrase-file is for --encrypt")
    if settings.backup_require_encryption and not encrypt:
        raise click.UsageError(
            f"this host takes encrypted backups only ({REQUIRE_ENCRYPTION_ENV}): add --encrypt"
        )
    if passphrase_file is not None:
        _passphrase(passphrase_file)  # readable now (it is read again at every backup)
    with open_engine(settings, load_activities=False) as engine:
        record = create_backup_schedule(
            engine,
            schedule_id,
            dest=dest,
            keep=keep,
            cron=cron,
            every=every,
            encrypt=encrypt,
            passphrase_file=passphrase_file,
        )
    out: dict[str, Any] = {
        "id": record.id,
        "tenant": PLATFORM_TENANT,
        "workflow": BACKUP_WORKFLOW,
        "spec": record.spec,
        "next_fire_at": None if record.next_fire_at is None else record.next_fire_at.isoformat(),
        "dest": str(dest),
        "keep": keep,
        "encrypt": encrypt,
    }
    if as_json:
        echo_json(out)
        return
    click.echo(
        f"backup schedule {record.id}: next at {out['next_fire_at']}, into {dest}, keeping "
        f"{keep}{', encrypted' if encrypt else ''} (runs in `wovyr serve` or `wovyr worker`)"
    )
    if encrypt and passphrase_file is None:
        click.echo(
            f"note: the workers that run it need {PASSPHRASE_ENV} in their environment",
            err=True,
        )


@admin.command("restore")
@click.argument("src", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--target",
    default=None,
    metavar="HOME|URL",
    help="Where to restore: a home folder (SQLite) or a postgresql:// URL; default: the "
    "configured store (--home/--db).",
)
@click.option(
    "--force",
    is_flag=True,
    help="Replace a target that holds data (never one a server or worker is using).",
)
@click.option(
    "--allow-unsigned",
    is_flag=True,
    help="Restore an unencrypted backup whose manifest no root key here shows to be genuine "
    "(one of an earlier Wovyr, or one that brings its own root key): only if you know where "
    "it came from.",
)
@_passphrase_option
@json_option
@store_options
def restore_command(
    src: Path,
    target: str | None,
    force: bool,
    allow_unsigned: bool,
    passphrase_file: Path | None,
    as_json: bool,
    settings: Settings,
) -> None:
    """Restore the backup SRC (checked first; nothing is touched when it is refused). A
    restore never replaces the host's root key, and refuses an unencrypted backup when a
    passphrase is given."""
    home = settings.home
    url = settings.store_url
    if target is not None:
        if restorable_url(target) is not None:
            url = target
        else:
            home = Path(target).expanduser()
            url = f"sqlite:///{home / 'wovyr.db'}"
    report = restore_backup(
        src,
        url,
        home,
        actor=local_actor(),
        at=datetime.now(UTC),
        force=force,
        passphrase=_passphrase(passphrase_file),
        redact=redact_url,
        require_encryption=settings.backup_require_encryption,
        allow_unsigned=allow_unsigned,
    )
    if as_json:
        echo_json(report.to_dict())
        return
    for note in report.notes:
        click.echo(f"note: {note}", err=True)
    click.echo(
        f"restored {src} (taken {report.manifest.data['created_at']}) into {report.target}: "
        f"schema {report.schema_version}, {report.audit.records} audit records verified, "
        f"{report.data_keys} data keys open; home files: {', '.join(report.files) or 'none'}"
    )


@backup_group.command("schedules")
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True)
@json_option
@engine_options
def schedules_command(limit: int, as_json: bool, settings: Settings) -> None:
    """The backup schedules and the latest backups they took (newest first)."""
    with open_engine(settings, load_activities=False) as engine:
        platform = engine.for_tenant(PLATFORM_TENANT)
        schedules = Schedules(platform).list()
        runs = platform.list(workflow=BACKUP_WORKFLOW, limit=limit).items
        taken = []
        for run in runs:
            view = platform.query(run.id)
            output = (view.output or {}).get("backup") if isinstance(view.output, dict) else None
            taken.append(
                {
                    "execution": run.id,
                    "status": view.status,
                    "at": run.created_at.isoformat(),
                    "backup": output,
                    "error": view.error,
                }
            )
    out = {
        "schedules": [
            {
                "id": s.id,
                "spec": s.spec,
                "input": s.input,
                "paused": s.paused,
                "next_fire_at": None if s.next_fire_at is None else s.next_fire_at.isoformat(),
                "fired": s.fired_count,
            }
            for s in schedules
        ],
        "backups": taken,
    }
    if as_json:
        echo_json(out)
        return
    for s in out["schedules"]:
        when = s["spec"].get("cron") or f"every {s['spec'].get('every')}s"
        click.echo(
            f"schedule {s['id']}: {when} into {s['input'].get('dest')} keeping "
            f"{s['input'].get('keep')}, next {s['next_fire_at']}, fired {s['fired']}"
        )
    for t in taken:
        where = (t["backup"] or {}).get("path") if t["backup"] else t["error"]
        click.echo(f"{t['at']}  {t['status']:9}  {where}")


@backup_group.command("unschedule")
@click.argument("schedule_id", default="backup")
@json_option
@engine_options
def unschedule_command(schedule_id: str, as_json: bool, settings: Settings) -> None:
    """Delete the backup schedule SCHEDULE_ID (default `backup`); backups taken stay."""
    with open_engine(settings, load_activities=False) as engine:
        Schedules(engine.for_tenant(PLATFORM_TENANT)).delete(schedule_id)
    if as_json:
        echo_json({"id": schedule_id, "deleted": True})
        return
    click.echo(f"backup schedule {schedule_id} deleted")
