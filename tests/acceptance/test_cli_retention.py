"""`wovyr admin retention show|set|run` and `wovyr workflows export` on the embedded store:
the host's administrator sets a tenant's and a workflow's days, a run purges what finished
before them (exporting it first when asked), and an export file reads back."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from wovyr.cli.main import main
from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.store.sqlite import SQLiteStore
from wovyr.testing import drain

QUICK = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: quick}
activities:
  - id: x
    set: {ok: true}
"""
HOLD = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: hold}
activities:
  - id: w
    wait: {signal: go}
"""


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("WOVYR_HOME", str(tmp_path))
    monkeypatch.delenv("WOVYR_DB", raising=False)
    monkeypatch.delenv("WOVYR_STORE_URL", raising=False)
    return tmp_path


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _old_runs(home: Path) -> dict[str, str]:
    """Runs that finished (or started) in 2020, long before the CLI's clock."""
    store = SQLiteStore(home / "wovyr.db")
    engine = Engine(store, clock=ManualClock(datetime(2020, 1, 1, tzinfo=UTC)))
    try:
        ids = {
            "quick": engine.start(QUICK).id,
            "hold-cancelled": engine.start(HOLD).id,
            "hold-waiting": engine.start(HOLD).id,
            "other-tenant": engine.for_tenant("acme").start(QUICK).id,
        }
        engine.cancel(ids["hold-cancelled"])
        drain(engine)
    finally:
        engine.close()
    return ids


def _listed(capsys: pytest.CaptureFixture[str], tenant: str = "default") -> set[str]:
    page = run_json(capsys, "workflows", "list", "--tenant", tenant)
    return {item["id"] for item in page["items"]}


def test_set_show_and_run(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ids = _old_runs(home)
    shown = run_json(capsys, "admin", "retention", "show", "default")
    assert shown == {"tenant": "default", "days": None, "workflows": {}, "export_to": None}
    run_json(capsys, "admin", "retention", "set", "default", "--days", "36500")
    archive = home / "archive"
    stored = run_json(
        capsys, "admin", "retention", "set", "default", "--workflow", "hold", "--days", "30",
        "--export-to", str(archive),
    )  # fmt: skip
    assert stored["days"] == 36500 and stored["workflows"] == {"hold": 30}

    reports = run_json(capsys, "admin", "retention", "run")

    assert [(r["tenant"], r["purged"], r["more"]) for r in reports] == [("default", 1, False)]
    assert _listed(capsys) == {ids["quick"], ids["hold-waiting"]}
    assert _listed(capsys, "acme") == {ids["other-tenant"]}
    [exported] = [
        json.loads(line) for line in Path(reports[0]["files"][0]).read_text().splitlines()
    ]
    assert exported["id"] == ids["hold-cancelled"]
    assert exported["view"]["status"] == "cancelled"
    assert exported["events"][-1]["type"] == "ExecutionCancelled"
    # dropping the workflow's own days leaves the tenant's; --clear keeps everything
    after = run_json(
        capsys, "admin", "retention", "set", "default", "--workflow", "hold", "--clear"
    )
    assert after["workflows"] == {}
    cleared = run_json(capsys, "admin", "retention", "set", "default", "--clear", "--no-export")
    assert cleared == {"tenant": "default", "days": None, "workflows": {}, "export_to": None}
    audit = [r["action"] for r in run_json(capsys, "admin", "audit", "list")]
    assert audit.count("tenant.retention") == 4 and "executions.purge" in audit
    assert main(["admin", "retention", "set", "default", "--workflow", "hold"]) != 0


def test_export_writes_the_finished_runs_before_a_time(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = _old_runs(home)
    out = home / "out.jsonl"
    done = run_json(capsys, "workflows", "export", "--before", "2021-01-01", "-o", str(out))
    assert done == {"file": str(out), "executions": 2}
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(line["id"] for line in lines) == sorted([ids["quick"], ids["hold-cancelled"]])
    assert {line["view"]["status"] for line in lines} == {"completed", "cancelled"}
    history = run_json(capsys, "workflows", "history", ids["quick"])
    [quick] = [line for line in lines if line["id"] == ids["quick"]]
    assert quick["events"] == history
    only = run_json(
        capsys, "workflows", "export", "--before", "2021-01-01T00:00:00Z", "--status", "cancelled",
        "-o", str(out),
    )  # fmt: skip
    assert only["executions"] == 1
    assert json.loads(out.read_text())["id"] == ids["hold-cancelled"]
    none = run_json(capsys, "workflows", "export", "--before", "2019-12-31", "-o", str(out))
    assert none["executions"] == 0 and out.read_text() == ""
    # nothing was deleted
    assert _listed(capsys) == {ids["quick"], ids["hold-cancelled"], ids["hold-waiting"]}
