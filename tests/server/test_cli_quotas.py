"""`wovyr admin quotas set|show` against the embedded store, and a CLI start over quota."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wovyr.cli.main import main

QUICK = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: quick}
activities:
  - id: x
    set: {ok: true}
"""


def test_quotas_set_show_and_a_refused_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("WOVYR_HOME", str(tmp_path))
    args = ["admin", "quotas", "set", "default", "--executions-per-day", "1"]
    assert main([*args, "--concurrent-executions", "4", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["quotas"]["executions_per_day"] == 1
    assert shown["quotas"]["concurrent_executions"] == 4
    assert main(["admin", "quotas", "set", "default", "--clear", "concurrent-executions"]) == 0
    assert "concurrent-executions" in capsys.readouterr().out
    flow = tmp_path / "quick.yaml"
    flow.write_text(QUICK, encoding="utf-8")
    assert main(["run", str(flow)]) == 0
    capsys.readouterr()
    assert main(["run", str(flow)]) == 1
    err = capsys.readouterr().err
    assert "quota exceeded: executions per day is 1" in err
    assert main(["admin", "quotas", "show", "default", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["used"] == {"executions": 1.0, "model_tokens": 0.0, "model_cost": 0.0}
    assert shown["quotas"]["concurrent_executions"] is None
    assert main(["admin", "quotas", "show", "default"]) == 0
    rows = {line.split()[0]: line.split()[1:] for line in capsys.readouterr().out.splitlines()}
    assert rows["executions-per-day"] == ["1", "1"]
    # model usage is counted without a quota; seconds are not, and say so
    assert rows["model-tokens-per-day"] == ["none", "0"]
    assert rows["activity-seconds-per-day"] == ["none", "not", "counted", "without", "a", "quota"]


def test_quotas_set_weight_and_max_slots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("WOVYR_HOME", str(tmp_path))
    assert main(["admin", "quotas", "show", "t1"]) == 0
    assert "default (1)" in capsys.readouterr().out
    args = ["admin", "quotas", "set", "t1", "--weight", "3", "--max-slots", "2", "--json"]
    assert main(args) == 0
    shown = json.loads(capsys.readouterr().out)["quotas"]
    assert (shown["weight"], shown["max_slots"]) == (3.0, 2)
    assert main(["admin", "quotas", "set", "t1", "--weight", "0"]) == 2  # click refuses it
    assert "--weight" in capsys.readouterr().err
    assert main(["admin", "quotas", "set", "t1", "--clear", "weight", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["quotas"]["weight"] is None


def test_quotas_set_max_running_is_stored_and_audited(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("WOVYR_HOME", str(tmp_path))
    args = ["admin", "quotas", "set", "t1", "--max-running", "2", "--json"]
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["quotas"]["max_running"] == 2
    assert main(["admin", "quotas", "set", "t1", "--max-running", "0"]) == 2  # 1 or more
    assert "--max-running" in capsys.readouterr().err
    assert main(["admin", "quotas", "show", "t1"]) == 0
    assert "max-running" in capsys.readouterr().out
    assert main(["admin", "quotas", "set", "t1", "--clear", "max-running", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["quotas"]["max_running"] is None
    assert main(["admin", "audit", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(r["action"], r["tenant"]) for r in listed] == [("tenant.quotas", "t1")] * 2


def test_quotas_set_max_schedules_and_a_refused_schedule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("WOVYR_HOME", str(tmp_path))
    args = ["admin", "quotas", "set", "default", "--max-schedules", "1", "--json"]
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["quotas"]["max_schedules"] == 1
    flow = tmp_path / "quick.yaml"
    flow.write_text(QUICK, encoding="utf-8")
    create = ["schedules", "create", "--file", str(flow), "--every", "1m"]
    assert main([*create, "first"]) == 0
    capsys.readouterr()
    assert main([*create, "second"]) == 1
    err = capsys.readouterr().err
    assert "quota exceeded: at most 1 schedules" in err and "delete a schedule" in err
