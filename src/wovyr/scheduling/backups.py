"""Scheduled backups: the platform's built-in backup workflow on a schedule.

`create_backup_schedule` applies `wovyr.platform.backup.BACKUP_WORKFLOW_YAML` in the
reserved platform tenant and schedules it; each execution takes one backup into `dest` and
prunes all but the newest `keep` (its output names the backup taken and those removed, so
the schedule's history is the list of backups). Only the host can do this: the platform
tenant is outside the tenant alphabet, so no API key acts for it.
"""

from __future__ import annotations

from pathlib import Path

from wovyr.engine.engine import Engine
from wovyr.platform.backup import BACKUP_WORKFLOW, BACKUP_WORKFLOW_YAML, PLATFORM_TENANT
from wovyr.scheduling.schedules import Schedules
from wovyr.store.schedules import ScheduleRecord

__all__ = ["create_backup_schedule"]


def create_backup_schedule(
    engine: Engine,
    schedule_id: str,
    *,
    dest: Path,
    keep: int,
    cron: str | None = None,
    every: str | None = None,
    encrypt: bool = False,
    passphrase_file: Path | None = None,
) -> ScheduleRecord:
    """Schedule backups into `dest` (made absolute), keeping the newest `keep`; with
    `encrypt`, each encrypted with the passphrase the worker reads when it runs, from
    `passphrase_file` (made absolute; the schedule keeps the path, never the passphrase)
    or its `WOVYR_BACKUP_PASSPHRASE`."""
    platform = engine.for_tenant(PLATFORM_TENANT)
    platform.apply(BACKUP_WORKFLOW_YAML)
    return Schedules(platform).create(
        schedule_id,
        workflow=BACKUP_WORKFLOW,
        cron=cron,
        every=every,
        input={
            "dest": str(dest.expanduser().resolve()),
            "keep": keep,
            "encrypt": encrypt,
            "passphrase_file": str(passphrase_file.expanduser().resolve())
            if passphrase_file
            else "",
        },
        note="built-in backup",
    )
