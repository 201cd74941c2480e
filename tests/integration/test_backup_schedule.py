"""Scheduled backups under a ManualClock: each fire takes a backup, only --keep are kept,
the executions' history lists them; a tenant's workflow cannot use the backup tool."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from wovyr.activities.base import ActivityRegistry
from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.errors import BackupRefused, InputError
from wovyr.platform.archive import LEGACY_HOME_FILES
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


def _worker(home: Path, **options: Any) -> tuple[Engine, ManualClock, Path]:
    """An engine over a SQLite store in `home` whose registry has the backup tool
    (`register_backup_activity` options: a worker's environment, the host's policy)."""
    clock = ManualClock(datetime(2030, 1, 1, 9, 0, tzinfo=UTC))
    store = SQLiteStore(home / "wovyr.db")
    registry = ActivityRegistry()
    engine = Engine(store, clock=clock, activities=registry)
    register_backup_activity(
        registry, store, home, lambda: load_kms(home, {}, warn=False), clock.now, **options
    )
    return engine, clock, home


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Engine, ManualClock, Path]:
    return _worker(tmp_path / "home")


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


def test_no_backup_carries_the_web_ui_session_key() -> None:
    assert SECRET_FILE not in HOME_FILES
    assert SECRET_FILE in LEGACY_HOME_FILES  # backups of format 1 may: never restored


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


def _platform_runs(engine: Engine) -> list[tuple[str, object, object]]:
    platform = engine.for_tenant(PLATFORM_TENANT)
    views = [platform.query(r.id) for r in platform.list(workflow="wovyr-backup").items]
    return [(v.status, v.output, v.error) for v in views]


def test_scheduled_backups_can_be_encrypted_with_a_passphrase_file(
    setup: tuple[Engine, ManualClock, Path], tmp_path: Path
) -> None:
    """Scheduled backups held the web UI's session key in clear and could not be encrypted:
    with `encrypt` each is sealed with the passphrase the worker reads from the file when it
    runs; the schedule keeps the file's path, never the passphrase."""
    engine, clock, home = setup
    secret = tmp_path / "passphrase"
    secret.write_text("sched-passphrase-7f3a\n")
    dest = tmp_path / "backups"
    create_backup_schedule(
        engine, "enc", dest=dest, keep=5, cron="0 * * * *", encrypt=True, passphrase_file=secret
    )
    _tick(engine, clock, 10)
    [(status, output, error)] = _platform_runs(engine)
    assert status == "completed", error
    assert isinstance(output, dict) and output["backup"]["encrypted"] is True
    [taken] = dest.iterdir()
    assert {p.name for p in taken.iterdir()} == {"manifest.json", "store.sqlite.enc"}
    assert verify_backup(taken, passphrase="sched-passphrase-7f3a", env={}).decrypted
    with pytest.raises(BackupRefused, match="not signed with this passphrase"):
        verify_backup(taken, passphrase="wrong", env={})
    for path in home.iterdir():  # the store keeps the path, never the passphrase
        if path.is_file():
            assert b"sched-passphrase-7f3a" not in path.read_bytes(), path.name


def test_an_encrypted_schedule_without_a_passphrase_fails_and_writes_nothing(
    setup: tuple[Engine, ManualClock, Path], tmp_path: Path
) -> None:
    engine, clock, _ = setup
    dest = tmp_path / "backups"
    create_backup_schedule(engine, "enc", dest=dest, keep=5, cron="0 * * * *", encrypt=True)
    _tick(engine, clock, 10)  # this worker has no WOVYR_BACKUP_PASSPHRASE
    [(status, _, error)] = _platform_runs(engine)
    assert status == "failed"
    assert "takes encrypted backups and there is no passphrase" in str(error)
    assert not dest.exists() or not any(dest.iterdir())


def test_a_worker_passphrase_from_its_environment_and_the_hosts_policy(
    tmp_path: Path,
) -> None:
    """The passphrase may come from the worker's environment (`env`); a host whose policy
    requires encryption (WOVYR_BACKUP_REQUIRE_ENCRYPTION) fails an unencrypted schedule."""
    engine, clock, _ = _worker(
        tmp_path / "home",
        env={"WOVYR_BACKUP_PASSPHRASE": "from-the-env"},
        require_encryption=True,
    )
    create_backup_schedule(
        engine, "enc", dest=tmp_path / "a", keep=5, cron="0 * * * *", encrypt=True
    )
    create_backup_schedule(engine, "plain", dest=tmp_path / "b", keep=5, cron="0 * * * *")
    _tick(engine, clock, 10)
    runs = _platform_runs(engine)
    assert sorted(status for status, _, _ in runs) == ["completed", "failed"]
    [error] = [e for status, _, e in runs if status == "failed"]
    assert "takes encrypted backups only" in str(error)
    [taken] = (tmp_path / "a").iterdir()
    assert verify_backup(taken, passphrase="from-the-env", env={}).decrypted
    assert not (tmp_path / "b").exists() or not any((tmp_path / "b").iterdir())
    engine.store.close()


def test_cli_schedule_with_encrypt(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from wovyr.cli.main import main

    home = ["--home", str(tmp_path / "h")]
    secret = tmp_path / "pw"
    secret.write_text("p")
    args = ["admin", "backup", "schedule", "--every", "1h", "--dest", str(tmp_path / "d")]
    assert main([*args, "--passphrase-file", str(secret), *home]) == 2  # needs --encrypt
    assert "--passphrase-file is for --encrypt" in capsys.readouterr().err
    assert main([*args, "--encrypt", "--passphrase-file", str(secret), "--json", *home]) == 0
    assert json.loads(capsys.readouterr().out)["encrypt"] is True
    assert main(["admin", "backup", "schedules", "--json", *home]) == 0
    [listed] = json.loads(capsys.readouterr().out)["schedules"]
    assert listed["input"]["encrypt"] is True
    assert listed["input"]["passphrase_file"] == str(secret.resolve())
