"""Scheduled backups under a ManualClock: each fire takes a backup, only --keep are kept,
the executions' history lists them; a tenant's workflow cannot use the backup tool."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from wovyr.activities.base import ActivityRegistry
from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.errors import InputError
from wovyr.platform.backup import (
    BACKUP_TOOL,
    HOME_FILES,
    PLATFORM_TENANT,
    read_manifest,
    register_backup_activity,
    verify_backup,
)
from wovyr.platform.kms import load_kms
from wovyr.scheduling.backups import create_backup_schedule
from wovyr.server.ui.session import SECRET_FILE
from wovyr.store.base import ExecutionFilter
from wovyr.store.sqlite import SQLiteStore
from wovyr.testing import drain


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Engine, ManualClock, Path]:
    home = tmp_path / "home"
    clock = ManualClock(datetime(2030, 1, 1, 9, 0, tzinfo=UTC))
    store = SQLiteStore(home / "wovyr.db")
    registry = ActivityRegistry()
    engine = Engine(store, clock=clock, activities=registry)
    register_backup_activity(
        registry, store, home, lambda: load_kms(home, {}, warn=False), clock.now
    )
    return engine, clock, home


def _tick(engine: Engine, clock: ManualClock, hour: int) -> None:
    clock.set(datetime(2030, 1, 1, hour, 0, tzinfo=UTC))
    drain(engine)
    drain(engine)


def test_scheduled_backup_runs_and_keeps_only_keep(
    setup: tuple[Engine, ManualClock, Path], tmp_path: Path
) -> None:
    engine, clock, _ = setup
    engine.start("""
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: w}
activities:
  - id: x
    set: {ok: true}
""")
    dest = tmp_path / "backups"
    record = create_backup_schedule(engine, "hourly", dest=dest, keep=2, cron="0 * * * *")
    assert record.tenant == PLATFORM_TENANT
    for hour in (10, 11, 12):
        _tick(engine, clock, hour)
    platform = engine.for_tenant(PLATFORM_TENANT)
    runs = platform.list(workflow="wovyr-backup", limit=10).items
    assert len(runs) == 3
    outputs = sorted((platform.query(r.id).output or {})["backup"]["path"] for r in runs)
    assert all(platform.query(r.id).status == "completed" for r in runs)
    kept = sorted(p.name for p in dest.iterdir())
    assert len(kept) == 2  # --keep 2: the oldest of three is gone
    assert [Path(p).name for p in outputs[1:]] == kept
    assert Path(outputs[0]).name not in kept
    newest = dest / kept[-1]
    assert read_manifest(newest).data["created_at"] == "2030-01-01T12:00:00+00:00"
    assert verify_backup(newest, env={}).audit.checked
    assert {f["name"] for f in read_manifest(newest).files} == {"store.sqlite"}


def test_a_tenant_cannot_use_the_backup_tool(
    setup: tuple[Engine, ManualClock, Path], tmp_path: Path
) -> None:
    engine, _, _ = setup
    evil = tmp_path / "evil"
    record = engine.start(
        f"""
apiVersion: wovyr/v1
kind: Workflow
metadata: {{name: steal}}
activities:
  - id: grab
    tool: {BACKUP_TOOL}
    with: {{dest: "{evil}", keep: 1}}
"""
    )
    drain(engine)
    view = engine.query(record.id)
    assert view.status == "failed"
    assert "runs only in the platform's scheduled backup" in str(view.error)
    assert not evil.exists()
    failed = engine.store.list_executions(ExecutionFilter(tenant="default", status="failed"))
    assert [r.id for r in failed.items] == [record.id]


def test_a_tenant_cannot_borrow_a_backup_runs_id(
    setup: tuple[Engine, ManualClock, Path], tmp_path: Path
) -> None:
    """Ids are per tenant: a tenant's run may carry the id of one of the platform's backup
    runs; the tool still refuses it (it asks whose run it is, not whether the id exists)."""
    engine, clock, _ = setup
    create_backup_schedule(engine, "hourly", dest=tmp_path / "backups", keep=2, cron="0 * * * *")
    _tick(engine, clock, 10)
    [taken] = engine.for_tenant(PLATFORM_TENANT).list(workflow="wovyr-backup").items
    evil = tmp_path / "evil"
    tenant = engine.for_tenant("acme")
    record = tenant.start(
        f"""
apiVersion: wovyr/v1
kind: Workflow
metadata: {{name: steal}}
activities:
  - id: grab
    tool: {BACKUP_TOOL}
    with: {{dest: "{evil}", keep: 1}}
""",
        execution_id=taken.id,
    )
    drain(tenant)
    view = tenant.query(record.id)
    assert view.status == "failed"
    assert "runs only in the platform's scheduled backup" in str(view.error)
    assert not evil.exists()


def test_the_platform_tenant_is_outside_the_tenant_alphabet() -> None:
    from wovyr.platform.auth import validate_tenant

    with pytest.raises(InputError):
        validate_tenant(PLATFORM_TENANT)


def test_home_files_match_the_server() -> None:
    assert SECRET_FILE in HOME_FILES


def test_cli_schedule_list_unschedule(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from wovyr.cli.main import main

    home = ["--home", str(tmp_path / "h")]
    args = ["admin", "backup", "schedule", "--cron", "0 * * * *", "--dest", str(tmp_path / "d")]
    assert main([*args, "--keep", "3", "--json", *home]) == 0
    made = json.loads(capsys.readouterr().out)
    assert made["tenant"] == PLATFORM_TENANT and made["keep"] == 3
    assert main([*args, *home]) == 1  # the id `backup` is taken
    assert "already exists" in capsys.readouterr().err
    assert main(["schedules", "list", "--json", *home]) == 0  # not the default tenant's
    assert json.loads(capsys.readouterr().out) == []
    assert main(["admin", "backup", "schedules", "--json", *home]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [s["id"] for s in listed["schedules"]] == ["backup"]
    assert listed["schedules"][0]["input"]["keep"] == 3
    assert main(["admin", "backup", "unschedule", *home]) == 0
    capsys.readouterr()
    assert main(["admin", "backup", "schedules", "--json", *home]) == 0
    assert json.loads(capsys.readouterr().out)["schedules"] == []
