"""`wovyr admin kms rotate` killed (SIGKILL) at many points of a real process (at its Nth
commit, by strace, so the points do not depend on the machine's speed): after each kill
every secret is readable with the old root key or with the new one (each data key is
wrapped by one of them, and says which), and running the rotation again finishes it: then
every secret reads with the new key alone, and the old key reads none.

The development mode's files too: killed after the next key was written (held there by a
write lock on the store), the key file and `kms-root.key.next` hold every key a data key is
wrapped by.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from wovyr.errors import KmsError
from wovyr.platform.kms import DEV_KEY_FILE, NEXT_KEY_FILE, Kms, RootKey, load_kms
from wovyr.platform.secrets import Secrets
from wovyr.store import open_store
from wovyr.store.base import Store

pytestmark = pytest.mark.slow

WOVYR = [sys.executable, "-c", "import sys; from wovyr.cli.main import main; sys.exit(main())"]
OLD = RootKey(bytes.fromhex("11" * 32))
NEW = RootKey(bytes.fromhex("22" * 32))
TENANTS = [f"t{i:02d}" for i in range(40)]
AT = datetime(2030, 1, 1, tzinfo=UTC)


def _reads(store: Store, key: RootKey, tenant: str) -> bool:
    try:
        value = Secrets(store, Kms(key, "production")).resolve_secret(tenant, "TOKEN")
    except KmsError:
        return False
    assert value == f"value-of-{tenant}"
    return True


def _rotate_until_killed(env: dict[str, str], lines: int) -> int:
    """Start a rotation, kill it after `lines` progress lines (0: after its first line);
    return its exit status. Where the kill lands depends on the machine's speed."""
    proc = subprocess.Popen(
        [*WOVYR, "admin", "kms", "rotate", "--verbose"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        text=True,
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()
    for _ in range(lines):
        if not proc.stdout.readline():
            break
    proc.send_signal(signal.SIGKILL)
    code = proc.wait(timeout=60)
    proc.stdout.close()
    assert first.startswith("rotating") or first == "" or code == 0
    return code


def _rotate_killed_at_sync(env: dict[str, str], n: int) -> int:
    """Run a rotation under strace, killed (SIGKILL) at its `n`th fdatasync: SQLite syncs
    once per commit, so the kill lands after the same writes on any machine. Return its
    exit status (-9 when killed)."""
    traced = subprocess.run(
        [
            "strace",
            "-f",
            "-qq",
            "-e",
            "trace=fdatasync",
            "-e",
            f"inject=fdatasync:signal=KILL:when={n}",
            *WOVYR,
            "admin",
            "kms",
            "rotate",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
        check=False,
        timeout=120,
    )
    killed = "+++ killed by SIGKILL +++" in traced.stderr  # strace then dies of it too
    return -signal.SIGKILL if killed else traced.returncode


@pytest.mark.usefixtures("strace_installed")
def test_a_rotation_killed_anywhere_leaves_every_secret_readable(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    url = f"sqlite:///{home / 'wovyr.db'}"
    store = open_store(url)
    secrets = Secrets(store, Kms(OLD, "production"))
    for tenant in TENANTS:
        secrets.set_secret(tenant, "TOKEN", f"value-of-{tenant}", by="test", at=AT)
    env = {
        **os.environ,
        "WOVYR_HOME": str(home),
        "WOVYR_KMS_ROOT_KEY": OLD.key.hex(),
        "WOVYR_KMS_NEW_ROOT_KEY": NEW.key.hex(),
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    progress: list[int] = []
    kills = 0
    for n in (1, 2, 4, 8, 16):  # each run goes further than the last one got
        kills += _rotate_killed_at_sync(env, n) == -signal.SIGKILL
        keys = store.list_data_keys()
        assert {k.root_id for k in keys} <= {OLD.key_id, NEW.key_id}
        for tenant in TENANTS:  # readable with one of the keys
            assert _reads(store, OLD, tenant) or _reads(store, NEW, tenant), tenant
        progress.append(sum(k.root_id == NEW.key_id for k in keys))
    assert kills == 5  # none of these runs got to the end
    assert progress == sorted(progress) and len(set(progress)) >= 4, progress
    assert progress[-1] < len(TENANTS)
    finished = subprocess.run(
        [*WOVYR, "admin", "kms", "rotate", "--json"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=120,
    )
    assert finished.returncode == 0, finished.stderr
    assert all(k.root_id == NEW.key_id for k in store.list_data_keys())
    for tenant in TENANTS:
        assert _reads(store, NEW, tenant)
        assert not _reads(store, OLD, tenant)
    root = store.kms_root(NEW.key_id)
    assert root is not None and root.rotated_at is not None
    store.close()


def test_a_development_rotation_killed_after_the_next_key_was_written(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    db = home / "wovyr.db"
    store = open_store(f"sqlite:///{db}")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("WOVYR_KMS")},
        "WOVYR_HOME": str(home),
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    first = load_kms(home, env, warn=False)
    first.register(store, AT)
    secrets = Secrets(store, first)
    for tenant in TENANTS:
        secrets.set_secret(tenant, "TOKEN", f"value-of-{tenant}", by="test", at=AT)
    # The first run is held at its first write (the new key's row), which comes after it
    # wrote the next key file, by a write lock this test takes first: killed there, it
    # stops between the two files whatever the machine's speed.
    lock = sqlite3.connect(db, isolation_level=None)
    lock.execute("BEGIN IMMEDIATE")
    proc = subprocess.Popen(
        [*WOVYR, "admin", "kms", "rotate"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    for _ in range(6000):  # bounded: the run writes the file, then blocks on the lock
        if (home / NEXT_KEY_FILE).exists() or proc.poll() is not None:
            break
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    lock.execute("ROLLBACK")
    lock.close()
    assert (home / NEXT_KEY_FILE).exists()
    killed = load_kms(home, env, warn=False)  # the key file and the next one
    assert killed.key_id == first.key_id and killed.next_key is not None
    for tenant in TENANTS:
        assert Secrets(store, killed).resolve_secret(tenant, "TOKEN") == f"value-of-{tenant}"
    for _ in range(10):  # then killed after a re-wrap, wherever that lands
        _rotate_until_killed(env, 1)
        loaded = load_kms(home, env, warn=False)
        for tenant in TENANTS:
            assert Secrets(store, loaded).resolve_secret(tenant, "TOKEN") == f"value-of-{tenant}"
        if not (home / NEXT_KEY_FILE).exists():
            break
        assert loaded.key_id == first.key_id and loaded.next_key == killed.next_key
    finished = subprocess.run(
        [*WOVYR, "admin", "kms", "rotate"], capture_output=True, env=env, check=False
    )
    assert finished.returncode == 0, finished.stderr
    assert not (home / NEXT_KEY_FILE).exists()
    after = load_kms(home, env, warn=False)
    assert after.key_id != first.key_id
    assert all(k.root_id == after.key_id for k in store.list_data_keys())
    assert (home / DEV_KEY_FILE).stat().st_mode & 0o777 == 0o600
    for tenant in TENANTS:
        assert Secrets(store, after).resolve_secret(tenant, "TOKEN") == f"value-of-{tenant}"
    store.close()
