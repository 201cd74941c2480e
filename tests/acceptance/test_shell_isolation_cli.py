"""Acceptance: a tenant granted a "restricted" shell (`wovyr admin tenants set beta --shell
--shell-command cat`) attacks the host through its workflows, run by a real `wovyr worker`
holding the KMS root key: it reads the worker's environment (`/proc/<worker>/environ`),
the first process's (`/proc/1/environ`), the development root key file and the database
under `WOVYR_HOME` (where another tenant's input lies in the clear). None of it reaches the
tenant: the worker holds the root key in memory only (not in the environment it shows), and
the steps run isolated (or, where this host cannot isolate them, are refused). The server's
worker process gets its secrets and configuration through a pipe, never its environment.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.isolation import unavailable
from tests.server.test_serve_process import WOVYR, Server, client, wait_for

from wovyr.engine.engine import Engine
from wovyr.store.sqlite import SQLiteStore

pytestmark = pytest.mark.slow

ROOT_KEY = "3c" * 32
CANARY = "alpha-canary-5e0d7c"
ENDED = ("completed", "failed")
READ = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: read}
inputs:
  path: {type: string}
activities:
  - id: cat
    shell: {argv: [cat, "${{ inputs.path }}"]}
    retry: {max_attempts: 1}
    timeout: 20s
"""
KEEP = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: keep}
inputs:
  note: {type: string}
activities:
  - id: later
    wait: {signal: go}
"""


def wovyr(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*WOVYR, *args], check=False, capture_output=True, text=True, env=env, timeout=120
    )


def environ_of(pid: int) -> bytes:
    return Path(f"/proc/{pid}/environ").read_bytes()


@pytest.fixture(params=["production", "development"])
def host(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    """A store whose root key is in the environment (production) or in WOVYR_HOME's key
    file (development), with tenant alpha's canary stored and tenant beta granted `cat`."""
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "WOVYR_HOME": str(home), "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("WOVYR_KMS_ROOT_KEY", None)
    if request.param == "production":
        env["WOVYR_KMS_ROOT_KEY"] = ROOT_KEY
    flow = tmp_path / "keep.yaml"
    flow.write_text(KEEP)
    kept = wovyr(env, "run", str(flow), "--tenant", "alpha", "-i", f"note={CANARY}", "--detach")
    assert kept.returncode == 0, kept.stderr
    granted = wovyr(env, "admin", "tenants", "set", "beta", "--shell", "--shell-command", "cat")
    assert granted.returncode == 0, granted.stderr
    assert "WARNING: tenant 'beta' may run programs" in granted.stderr
    return env


def secrets_of(env: dict[str, str]) -> list[str]:
    """What must never reach tenant beta: the root key in either mode, alpha's input."""
    home = Path(env["WOVYR_HOME"])
    found = [CANARY]
    if "WOVYR_KMS_ROOT_KEY" in env:
        found.append(env["WOVYR_KMS_ROOT_KEY"])
    key_file = home / "kms-root.key"
    if key_file.exists():
        found.append(key_file.read_text().strip())
    return found


def attack(env: dict[str, str], targets: list[str]) -> list[dict[str, Any]]:
    """Tenant beta's executions, one `cat` of each target, started here and run by the
    worker; each as `wovyr workflows show --json` shows it to the tenant once it ended."""
    store = SQLiteStore(Path(env["WOVYR_HOME"]) / "wovyr.db")
    try:
        beta = Engine(store).for_tenant("beta")
        ids = [beta.start(READ, {"path": target}).id for target in targets]
        for execution in ids:
            wait_for(lambda e=execution: beta.query(e).status in ENDED, 60, execution)
    finally:
        store.close()
    views = []
    for execution in ids:
        shown = wovyr(env, "workflows", "show", execution, "--tenant", "beta", "--json")
        assert shown.returncode in (0, 1), shown.stderr
        views.append(json.loads(shown.stdout))
    return views


def test_a_restricted_shell_tenant_reads_no_secret_of_the_worker(
    host: dict[str, str], tmp_path: Path
) -> None:
    env = host
    home = Path(env["WOVYR_HOME"])
    log = (tmp_path / "worker.log").open("wb")
    worker = subprocess.Popen(
        [*WOVYR, "worker", "--poll-interval", "0.1"], env=env, stdout=log, stderr=log
    )
    try:
        wait_for(lambda: b"worker " in (tmp_path / "worker.log").read_bytes(), 60, "the worker")
        targets = [
            f"/proc/{worker.pid}/environ",
            "/proc/1/environ",
            str(home / "kms-root.key"),
            str(home / "wovyr.db"),
            str(home / "wovyr.db-wal"),
        ]
        views = attack(env, targets)
        worker_environ = environ_of(worker.pid)
    finally:
        worker.terminate()
        worker.wait(timeout=60)
        log.close()

    secrets = secrets_of(env)
    leaked = {
        target: [s for s in secrets if s in json.dumps(view)]
        for target, view in zip(targets, views, strict=True)
    }
    assert not any(leaked.values()), leaked
    # isolated, cat finds nothing to read; where this host cannot isolate, the step is
    # refused before anything runs
    refusal = "NonZeroExit" if unavailable() is None else "PolicyDenied"
    for target, view in zip(targets, views, strict=True):
        assert view["status"] == "failed", (target, view["activities"]["cat"])
        assert view["activities"]["cat"]["error"]["type"] == refusal, target
    # the worker holds the root key in memory, not in the environment /proc shows
    assert ROOT_KEY.encode() not in worker_environ
    assert b"WOVYR_KMS_ROOT_KEY" not in worker_environ


def test_the_server_and_its_worker_process_show_no_secret_in_their_environment(
    tmp_path: Path,
) -> None:
    secrets = {"WOVYR_KMS_ROOT_KEY": ROOT_KEY, "WOVYR_LLM_API_KEY": "llm-key-canary"}
    server = Server(tmp_path / "home", secrets)
    server.home.mkdir()
    server.start()
    try:
        assert server.proc is not None
        pid = server.proc.pid
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        assert children, "the server runs its worker in a child process"
        environs = {p: environ_of(int(p)) for p in [str(pid), *children]}
        with client(server) as http:  # the worker process got its configuration: it runs
            flow = "apiVersion: wovyr/v1\nkind: Workflow\nmetadata: {name: s}\n"
            flow += "activities:\n  - id: a\n    set: {ok: true}\n"
            started = http.post("/api/v1/workflows", json={"definition": flow})
            assert started.status_code == 201, started.text
            url = f"/api/v1/workflows/{started.json()['id']}"
            wait_for(lambda: http.get(url).json()["status"] == "completed", 60, "the run")
    finally:
        assert server.stop() == 0

    for shown_by, shown in environs.items():
        for secret in (ROOT_KEY, "llm-key-canary", "WOVYR_WORKER_PROCESS_CONFIG"):
            assert secret.encode() not in shown, (shown_by, secret)


def completed_backups(dest: Path) -> list[Path]:
    return sorted(m for m in dest.glob("*/manifest*") if not m.parent.name.startswith("."))


def test_a_withheld_backup_passphrase_still_encrypts_the_workers_scheduled_backups(
    tmp_path: Path,
) -> None:
    # The worker holds WOVYR_BACKUP_PASSPHRASE in memory, not in its environment, and its
    # scheduled backups are still encrypted with it.
    home, dest = tmp_path / "home", tmp_path / "backups"
    home.mkdir()
    passphrase = "withheld-passphrase-1f3a"
    env = {
        **os.environ,
        "WOVYR_HOME": str(home),
        "WOVYR_BACKUP_PASSPHRASE": passphrase,
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    scheduled = wovyr(
        env, "admin", "backup", "schedule", "--every", "1s", "--dest", str(dest), "--encrypt"
    )
    assert scheduled.returncode == 0, scheduled.stderr
    log = (tmp_path / "worker.log").open("wb")
    worker = subprocess.Popen(
        [*WOVYR, "worker", "--poll-interval", "0.1"], env=env, stdout=log, stderr=log
    )
    try:
        # A backup is built in a hidden `.NAME.partial-*` folder and renamed when complete:
        # only a completed one is taken (pathlib's glob matches hidden folders too).
        taken = wait_for(lambda: completed_backups(dest), 60, "a scheduled backup")
        shown = environ_of(worker.pid)
    finally:
        worker.terminate()
        worker.wait(timeout=60)
        log.close()

    assert passphrase.encode() not in shown
    backup = taken[0].parent
    without = {k: v for k, v in env.items() if k != "WOVYR_BACKUP_PASSPHRASE"}
    opened = wovyr(env, "admin", "backup", "verify", str(backup), "--json")
    unopened = wovyr(without, "admin", "backup", "verify", str(backup))
    assert opened.returncode == 0, opened.stderr
    assert json.loads(opened.stdout)["decrypted"] is True  # opened with the passphrase
    assert "encrypted and no passphrase given" in unopened.stderr
