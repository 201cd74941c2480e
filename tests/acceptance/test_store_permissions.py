"""The files of an installation are its owner's alone, whatever the umask: after a fresh
`wovyr run` (umask 022, which made them world-readable), WOVYR_HOME is 0700, the database
and its -wal and -shm are 0600, and so are the KMS key and the files of a backup. A store
made before is tightened when it is next opened."""

from __future__ import annotations

import os
import signal
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def wovyr(home: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "WOVYR_HOME": str(home)}
    env.pop("WOVYR_DATABASE_URL", None)
    env.pop("WOVYR_KMS_ROOT_KEY", None)
    return subprocess.Popen(
        [sys.executable, "-m", "wovyr", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
        process_group=0,
        umask=0o022,  # the usual default: files 0644, folders 0755
    )


def done(process: subprocess.Popen[str]) -> str:
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    return out


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_fresh_run_leaves_files_only_their_owner_can_read(tmp_path: Path) -> None:
    home = tmp_path / "home"
    done(wovyr(home, "run", str(ROOT / "examples" / "hello.yaml"), "-i", "name=Ada"))
    assert mode(home) == 0o700
    assert mode(home / "wovyr.db") == 0o600
    done(wovyr(home, "admin", "kms", "status"))  # makes the development key
    assert mode(home / "kms-root.key") == 0o600

    worker = wovyr(home, "worker")  # holds the store open: its -wal and -shm exist
    try:
        deadline = time.monotonic() + 30
        sides = [home / "wovyr.db-wal", home / "wovyr.db-shm"]
        while not all(p.exists() for p in sides):
            assert worker.poll() is None, worker.communicate()
            assert time.monotonic() < deadline, "the worker never opened the store"
            time.sleep(0.05)
        assert [mode(p) for p in sides] == [0o600, 0o600]
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.communicate(timeout=30)

    done(wovyr(home, "admin", "backup", str(tmp_path / "bk")))
    assert mode(tmp_path / "bk") == 0o700
    assert {p.name: mode(p) for p in (tmp_path / "bk").iterdir()} == {
        "manifest.json": 0o600,
        "store.sqlite": 0o600,
    }


def test_a_store_made_world_readable_before_is_tightened_when_opened(tmp_path: Path) -> None:
    db = tmp_path / "home" / "wovyr.db"
    db.parent.mkdir()
    old = sqlite3.connect(db)  # what an earlier version left: 0644 under umask 022
    old.execute("PRAGMA journal_mode = WAL")
    old.execute("CREATE TABLE t (x)")
    old.commit()
    try:
        for path in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
            path.chmod(0o644)
        done(wovyr(db.parent, "workflows", "list"))
        assert [mode(db), mode(Path(f"{db}-wal")), mode(Path(f"{db}-shm"))] == [0o600] * 3
    finally:
        old.close()
