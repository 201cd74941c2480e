"""`wovyr workflows bulk ...` and `wovyr batches ...` as a user runs them: real subprocesses
over a temporary embedded store, each bulk action worked on here with `--wait`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.acceptance.test_cli import ROOT, wovyr

from wovyr.engine.engine import Engine
from wovyr.store.sqlite import SQLiteStore

pytestmark = pytest.mark.slow
FLOW = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: orders}
activities:
  - {id: wait, wait: {signal: go}}
"""


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    store = SQLiteStore(home / "wovyr.db")
    try:
        engine = Engine(store)
        for i in range(5):
            engine.start(FLOW, execution_id=f"o-{i}", labels={"shard": "a" if i < 3 else "b"})
        engine.for_tenant("other").start(FLOW, execution_id="o-0", labels={"shard": "a"})
    finally:
        store.close()
    return home


def answering(home: Path, answer: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`wovyr` with `answer` on its standard input (a confirmation prompt's reply)."""
    env = {**os.environ, "WOVYR_HOME": str(home)}
    env.pop("WOVYR_DATABASE_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "wovyr", *args],
        input=answer,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
        cwd=ROOT,
    )


def statuses(home: Path, tenant: str = "default") -> dict[str, str]:
    done = wovyr(home, "workflows", "list", "--json", "--tenant", tenant)
    assert done.returncode == 0, done.stderr
    return {i["id"]: i["status"] for i in json.loads(done.stdout)["items"]}


def test_bulk_actions_from_the_cli(home: Path) -> None:
    signal = wovyr(
        home, "workflows", "bulk", "signal", "go", "--label", "shard=b", "--payload", '{"n": 1}',
        "--wait", "--json",
    )  # fmt: skip
    assert signal.returncode == 0, signal.stderr
    sent = json.loads(signal.stdout)
    assert sent["status"] == "completed" and sent["progress"]["ok"] == 2

    cancel = wovyr(
        home, "workflows", "bulk", "cancel", "--label", "shard=a", "--idempotency-key", "k1",
        "--wait",
    )  # fmt: skip
    assert cancel.returncode == 0, cancel.stderr
    assert "submitted: cancel label shard=a" in cancel.stdout
    assert "3 ok, 0 skipped, 0 errors, 0 pending of 3" in cancel.stdout
    assert statuses(home) == {
        "o-0": "cancelled",
        "o-1": "cancelled",
        "o-2": "cancelled",
        "o-3": "running",
        "o-4": "running",
    }
    assert statuses(home, "other") == {"o-0": "running"}  # another tenant: untouched

    again = wovyr(
        home, "workflows", "bulk", "cancel", "--label", "shard=a", "--idempotency-key", "k1",
        "--json",
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["progress"]["ok"] == 3  # the same batch

    rerun = wovyr(home, "workflows", "bulk", "rerun", "--status", "cancelled", "--wait", "--json")
    assert rerun.returncode == 0, rerun.stderr
    reran = json.loads(rerun.stdout)
    assert reran["progress"]["ok"] == 3

    refused = answering(home, "n\n", "workflows", "bulk", "delete", "--status", "cancelled")
    assert refused.returncode == 130 and "Aborted" in refused.stderr  # nothing submitted
    delete = wovyr(
        home, "workflows", "bulk", "delete", "--status", "cancelled", "--yes", "--wait", "--json"
    )
    assert delete.returncode == 0, delete.stderr
    assert json.loads(delete.stdout)["progress"]["ok"] == 3
    assert "o-0" not in statuses(home) and "o-3" in statuses(home)

    listed = wovyr(home, "batches", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    actions = [b["action"] for b in json.loads(listed.stdout)["items"]]
    assert sorted(actions) == ["cancel", "delete", "rerun", "signal"]
    shown = wovyr(home, "batches", "show", reran["id"])
    assert shown.returncode == 0, shown.stderr
    assert "o-0~r" in shown.stdout and "ok" in shown.stdout
    hidden = wovyr(home, "batches", "show", reran["id"], "--tenant", "other")
    assert hidden.returncode == 4  # another tenant's batch: not found

    empty = wovyr(home, "workflows", "bulk", "cancel")
    assert empty.returncode == 1 and "at least one criterion" in (empty.stderr + empty.stdout)
