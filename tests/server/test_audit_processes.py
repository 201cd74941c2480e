"""Acceptance: several real processes extend ONE audit chain.

- SQLite: a `wovyr serve` process taking starts over HTTP while `wovyr` CLI processes start
  executions on the same file; the server signs anchors meanwhile, with the KMS's
  development key (no `WOVYR_KMS_ROOT_KEY`), and they still verify after `wovyr admin kms
  rotate` replaced that key;
- PostgreSQL: three `wovyr serve` processes on one database, each taking starts at once.

Afterwards `wovyr admin audit verify` (a process of its own) finds one gap-free chain that
verifies against the signed anchors, with exactly one record per start.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from tests.server.test_serve_process import TICK_FLOW, WOVYR, Server

pytestmark = pytest.mark.slow
ROOT = "cd" * 32


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[Callable[..., Server]]:
    made: list[Server] = []

    def make(name: str, **env: str) -> Server:
        home = tmp_path / name
        home.mkdir()
        settings = {
            "WOVYR_DISPATCH_INTERVAL_SECONDS": "0.2",
            "WOVYR_KMS_ROOT_KEY": ROOT,
            "WOVYR_AUDIT_ANCHOR_INTERVAL_SECONDS": "0.3",
            **env,
        }
        server = Server(home, settings)
        made.append(server)
        return server

    yield make
    for server in made:
        if server.proc is not None and server.proc.poll() is None:
            server.proc.kill()
            server.proc.wait(timeout=30)


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*WOVYR, *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def http_starts(server: Server, token: str, count: int, errors: list[str]) -> None:
    with httpx.Client(
        base_url=server.base, headers={"Authorization": f"Bearer {token}"}, timeout=30
    ) as http:
        for _ in range(count):
            r = http.post("/api/v1/workflows", json={"definition": TICK_FLOW})
            if r.status_code != 201:
                errors.append(r.text)


def verified(env: dict[str, str]) -> dict[str, object]:
    done = cli(env, "admin", "audit", "verify", "--json")
    out: dict[str, object] = json.loads(done.stdout)
    assert done.returncode == 0, (done.stdout, done.stderr)
    return out


@pytest.mark.timeout(240)
def test_cli_and_server_extend_one_chain_on_one_sqlite_file(
    servers: Callable[..., Server], tmp_path: Path
) -> None:
    server = servers("home", WOVYR_KMS_ROOT_KEY="")  # development mode: the key file
    server.start()
    token = server.bootstrap_token()
    flow = tmp_path / "tick.yaml"
    flow.write_text(TICK_FLOW)
    env = {"WOVYR_HOME": str(server.home), "WOVYR_KMS_ROOT_KEY": ""}
    errors: list[str] = []
    over_http = threading.Thread(target=http_starts, args=(server, token, 40, errors))
    over_http.start()
    cli_runs = 8
    for _ in range(cli_runs):  # each a process of its own, writing while the server writes
        done = cli(env, "run", str(flow), "--json")
        assert done.returncode == 0, done.stderr
    over_http.join()
    assert errors == []
    assert server.stop() == 0  # and its last anchor at shutdown
    out = verified(env)
    assert out["records"] == 40 + cli_runs and out["head_seq"] == 40 + cli_runs
    assert out["anchors_verified"] and int(str(out["anchors"])) >= 1
    listed = json.loads(cli(env, "admin", "audit", "list", "--json").stdout)
    assert [r["seq"] for r in listed] == list(range(1, 40 + cli_runs + 1))
    actors = {r["actor"] for r in listed}
    assert len(actors) == 2 and any(a.startswith("local:") for a in actors)
    assert {r["action"] for r in listed} == {"execution.start"}
    # the server's anchors survive a rotation of the development key (a process of its own)
    old_key = (server.home / "kms-root.key").read_text()
    rotated = cli(env, "admin", "kms", "rotate")
    assert rotated.returncode == 0, rotated.stderr
    assert (server.home / "kms-root.key").read_text() != old_key
    out = verified(env)
    assert out["records"] == 40 + cli_runs + 1  # and kms.rotate
    assert out["anchors_verified"] and out["ok"] and int(str(out["anchors"])) >= 1
    # the CLI's anchor extends the proof; a tampered record is then caught by a new process
    assert cli(env, "admin", "audit", "anchor").returncode == 0
    with sqlite3.connect(server.home / "wovyr.db") as conn:
        conn.execute("UPDATE audit_log SET actor = 'local:mallory' WHERE seq = 7")
    broken = cli(env, "admin", "audit", "verify")
    assert broken.returncode == 1
    assert "audit chain BROKEN at seq 7:" in broken.stdout


@pytest.mark.postgres
@pytest.mark.timeout(240)
def test_three_servers_extend_one_chain_on_postgres(
    servers: Callable[..., Server], postgres_url: str
) -> None:
    three = [servers(f"s{i}", WOVYR_DATABASE_URL=postgres_url) for i in range(3)]
    for server in three:
        server.start()
    token = three[0].bootstrap_token()  # one key for the shared database
    errors: list[str] = []
    per_server = 25
    threads = [
        threading.Thread(target=http_starts, args=(server, token, per_server, errors))
        for server in three
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for server in three:
        assert server.stop() == 0
    env = {"WOVYR_DATABASE_URL": postgres_url, "WOVYR_KMS_ROOT_KEY": ROOT}
    out = verified(env)
    assert out["records"] == 3 * per_server and out["head_seq"] == 3 * per_server
    assert out["anchors_verified"] and int(str(out["anchors"])) >= 1
