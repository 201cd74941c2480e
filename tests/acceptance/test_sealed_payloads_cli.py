"""Acceptance, processes and the CLI: `wovyr admin tenants set T --seal-payloads` (audited)
makes a run's payloads sealed in the SQLite file; another process with the same
`WOVYR_KMS_ROOT_KEY` shows them, one with another key gets a clear error (no traceback)
and still reads the unsealed tenant; `wovyr admin tenants shred T --yes` leaves the marker
in what `show` and `history` print."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.probe import answers
from tests.server.test_serve_process import WOVYR, free_port, wait_for

from wovyr.store.sealing import SHREDDED_MARKER

pytestmark = pytest.mark.slow

ROOT_KEY = "3c" * 32
CANARY = 'cnry-cli-41f0/+"x'
FLOW = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: canary}
inputs:
  word: {type: string}
activities:
  - id: keep
    set: {kept: "${{ inputs.word }}"}
output: {kept: "${{ activities.keep.output.kept }}"}
"""


def wovyr(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*WOVYR, *args], check=False, capture_output=True, text=True, env=env, timeout=120
    )


def ok_json(env: dict[str, str], *args: str) -> Any:
    done = wovyr(env, *args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_sealed_payloads_through_the_cli_and_processes(tmp_path: Path) -> None:
    home = tmp_path / "home"
    flow = tmp_path / "flow.yaml"
    flow.write_text(FLOW)
    env = {
        **os.environ,
        "WOVYR_HOME": str(home),
        "WOVYR_KMS_ROOT_KEY": ROOT_KEY,
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    env.pop("WOVYR_DATABASE_URL", None)
    shown = ok_json(env, "admin", "tenants", "set", "acme", "--seal-payloads")
    assert shown["seal_payloads"] is True
    audit = ok_json(env, "admin", "audit", "list", "--tenant", "acme")
    assert [r["action"] for r in audit] == ["tenant.seal_payloads"]

    sealed = ok_json(env, "run", str(flow), "-i", f"word={CANARY}", "--tenant", "acme")
    plain = ok_json(env, "run", str(flow), "-i", "word=plain-word", "--tenant", "other")
    assert sealed["output"] == {"kept": CANARY}
    stored = b"".join(p.read_bytes() for p in home.iterdir() if p.name.startswith("wovyr.db"))
    assert CANARY.encode() not in stored and json.dumps(CANARY)[1:-1].encode() not in stored
    assert b"plain-word" in stored

    # a second process with the same root key reads them
    view = ok_json(env, "workflows", "show", sealed["id"], "--tenant", "acme")
    assert view["input"] == {"word": CANARY} and view["output"] == {"kept": CANARY}

    # another root key: a clear error for the sealed tenant; the other still reads
    wrong = {**env, "WOVYR_KMS_ROOT_KEY": "c3" * 32}
    done = wovyr(wrong, "workflows", "show", sealed["id"], "--tenant", "acme")
    assert done.returncode == 1
    assert done.stderr.startswith("error: the data key of tenant 'acme' is wrapped by root key")
    assert "Traceback" not in done.stderr and CANARY not in done.stdout + done.stderr
    assert ok_json(wrong, "workflows", "show", plain["id"], "--tenant", "other")["output"] == {
        "kept": "plain-word"
    }

    shred = ok_json(env, "admin", "tenants", "shred", "acme", "--yes")
    assert shred["data_keys_destroyed"] == 1
    view = ok_json(env, "workflows", "show", sealed["id"], "--tenant", "acme")
    assert view["status"] == "completed" and view["input"] == {"sealed": SHREDDED_MARKER}
    history = ok_json(env, "workflows", "history", sealed["id"], "--tenant", "acme")
    assert history and all(e["data"] == {"sealed": SHREDDED_MARKER} for e in history)
    done = wovyr(env, "workflows", "show", sealed["id"], "--tenant", "acme")
    assert done.returncode == 0 and "shredded" in done.stdout
    actions = [r["action"] for r in ok_json(env, "admin", "audit", "list", "--tenant", "acme")]
    assert actions[-1] == "tenant.shred"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> str | None:
    """None: the embedded SQLite store under WOVYR_HOME; else a PostgreSQL URL (a schema)."""
    if request.param == "sqlite":
        return None
    return str(request.getfixturevalue("postgres_url"))


def test_a_worker_process_runs_a_sealed_tenants_execution(
    tmp_path: Path, database: str | None
) -> None:
    home = tmp_path / "home"
    flow = tmp_path / "flow.yaml"
    flow.write_text(FLOW)
    env = {
        **os.environ,
        "WOVYR_HOME": str(home),
        "WOVYR_KMS_ROOT_KEY": ROOT_KEY,
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    env.pop("WOVYR_DATABASE_URL", None)
    if database is not None:
        env["WOVYR_DATABASE_URL"] = database
        assert wovyr(env, "db", "upgrade").returncode == 0
    ok_json(env, "admin", "tenants", "set", "acme", "--seal-payloads")
    started = ok_json(env, "run", str(flow), "-i", f"word={CANARY}", "--tenant", "acme", "--detach")
    worker = subprocess.Popen(
        [*WOVYR, "worker", "--poll-interval", "0.05"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        view: dict[str, Any] = {}
        while time.monotonic() < deadline:
            view = ok_json(env, "workflows", "show", started["id"], "--tenant", "acme")
            if view["status"] == "completed":
                break
            time.sleep(0.2)
        assert view["status"] == "completed", view
        assert view["output"] == {"kept": CANARY}
    finally:
        worker.terminate()
        _, err = worker.communicate(timeout=30)
    assert "Traceback" not in err
    if database is None:
        stored = b"".join(p.read_bytes() for p in home.iterdir() if p.name.startswith("wovyr.db"))
    else:
        import psycopg

        with psycopg.connect(database) as conn:
            rows = conn.execute(
                "SELECT input::text, output::text, checkpoint::text FROM executions"
                " UNION ALL SELECT data::text, '', '' FROM events"
            ).fetchall()
        stored = repr(rows).encode()
    assert b"$sealed" in stored  # the rows were read: what they hold is sealed
    assert CANARY.encode() not in stored and json.dumps(CANARY)[1:-1].encode() not in stored


def test_the_server_and_its_worker_process_run_and_show_a_sealed_run(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {
        **os.environ,
        "WOVYR_HOME": str(home),
        "WOVYR_KMS_ROOT_KEY": ROOT_KEY,
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    env.pop("WOVYR_DATABASE_URL", None)
    ok_json(env, "admin", "tenants", "set", "default", "--seal-payloads")
    port = free_port()
    log_path = tmp_path / "serve.out"
    with log_path.open("wb") as log:
        server = subprocess.Popen(
            [*WOVYR, "serve", "--port", str(port)], stdout=log, stderr=subprocess.STDOUT, env=env
        )
    base = f"http://127.0.0.1:{port}"
    try:

        def ready() -> bool:
            assert server.poll() is None, log_path.read_text()
            return answers(base)

        wait_for(ready, 60, "the server")
        token = next(
            line.strip()
            for line in log_path.read_text().splitlines()
            if line.strip().startswith("wvr_")
        )
        with httpx.Client(
            base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=30
        ) as http:
            body = {"definition": FLOW, "input": {"word": CANARY}}
            started = http.post("/api/v1/workflows", json=body)
            assert started.status_code == 201, started.text
            execution = started.json()["id"]

            def finished() -> dict[str, Any] | None:
                shown: dict[str, Any] = http.get(f"/api/v1/workflows/{execution}").json()
                return shown if shown["status"] in ("completed", "failed") else None

            shown = wait_for(finished, 60, "the execution")
            assert shown["status"] == "completed", shown
            assert shown["input"] == {"word": CANARY} and shown["output"] == {"kept": CANARY}
    finally:
        server.terminate()
        server.wait(timeout=60)
    stored = b"".join(p.read_bytes() for p in home.iterdir() if p.name.startswith("wovyr.db"))
    assert CANARY.encode() not in stored and json.dumps(CANARY)[1:-1].encode() not in stored
    assert "Traceback" not in log_path.read_text()
