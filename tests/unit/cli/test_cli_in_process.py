"""The CLI commands called in-process (`wovyr.cli.main.main`), so coverage sees them.

The acceptance tests run the same commands as subprocesses; these check the paths a user
meets, tables and JSON alike: run / resume / detach, inspecting and steering executions,
definitions, schedules, and the errors (exit 1 with `error: ...`, never a traceback).
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from wovyr.cli.main import main

ROOT = Path(__file__).resolve().parents[3]
HELLO = ROOT / "examples" / "hello.yaml"
WAITS = textwrap.dedent("""
    apiVersion: wovyr/v1
    kind: Workflow
    metadata: {name: waits, version: "2"}
    inputs:
      who: {type: string, default: me}
    activities:
      - {id: hello, set: {to: "${{ inputs.who }}"}}
      - {id: go, needs: [hello], wait: {signal: go}}
      - {id: ok, needs: [go], wait: {approval: {approvers: [ada]}}}
    output: {signal: "${{ activities.go.output }}"}
    """)


class Cli:
    """Runs `wovyr ARGS --home HOME` in this process; returns (exit code, stdout, stderr)."""

    def __init__(self, home: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.home = home
        self.capsys = capsys

    def __call__(self, *args: str) -> tuple[int, str, str]:
        self.capsys.readouterr()
        code = main([*args, "--home", str(self.home)])
        out, err = self.capsys.readouterr()
        assert "Traceback" not in out + err
        return code, out, err

    def json(self, *args: str) -> Any:
        code, out, err = self(*args, "--json")
        assert code in (0, 3), (code, out, err)
        return json.loads(out)


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    monkeypatch.delenv("WOVYR_DATABASE_URL", raising=False)
    monkeypatch.setenv("COLUMNS", "200")
    return Cli(tmp_path / "home", capsys)


@pytest.fixture
def waits(tmp_path: Path) -> Path:
    path = tmp_path / "waits.yaml"
    path.write_text(WAITS)
    return path


def test_run_prints_a_table_or_json_and_exits_0(cli: Cli) -> None:
    code, out, _ = cli("run", str(HELLO), "-i", "name=Ada", "--id", "hello-1")
    assert code == 0 and "completed" in out and "Hello, Ada!" in out
    view = cli.json("run", str(HELLO), "--id", "hello-1")  # an existing id: resumed, as is
    assert view["status"] == "completed" and view["output"]["greeting"] == "Hello, Ada!"
    code, out, _ = cli("run", str(HELLO), "--detach", "--id", "hello-2")
    assert code == 0 and "hello-2" in out


def test_run_starts_a_registered_workflow_by_name(cli: Cli, waits: Path) -> None:
    assert cli("definitions", "apply", str(waits), str(HELLO))[0] == 0
    view = cli.json("run", "--workflow", "hello", "-i", "name=Ada")
    assert view["workflow"] == "hello" and view["output"]["greeting"] == "Hello, Ada!"
    view = cli.json("run", "--workflow", "waits@2", "--id", "w-1")
    assert (view["workflow"], view["version"], view["status"]) == ("waits", "2", "waiting")
    code, _, err = cli("run", "--workflow", "waits@7")
    assert code == 4 and "no workflow 'waits' version '7'" in err
    for both_or_neither in (("run", str(HELLO), "--workflow", "hello"), ("run",)):
        code, _, err = cli(*both_or_neither)
        assert code == 2 and "FILE or --workflow" in err


def test_waiting_run_exits_3_and_is_steered_through_the_cli(
    cli: Cli, waits: Path, tmp_path: Path
) -> None:
    inputs = tmp_path / "inputs.json"
    inputs.write_text('{"who": "you"}')
    code, out, _ = cli("run", str(waits), "--id", "w-1", "--input-file", str(inputs))
    assert code == 3 and "waiting on:\n  signal 'go' (go of w-1)" in out
    assert f"wovyr workflows signal w-1 go --home {cli.home}" in out
    sent = cli.json("workflows", "signal", "w-1", "go", "--payload", '{"n": 1}')
    assert sent["buffered_signals"] == {"go": 1}
    view = cli.json("run", str(waits), "--id", "w-1")  # resume: the signal is consumed
    assert view["status"] == "waiting" and view["activities"]["go"]["output"] == {"n": 1}
    code, _, err = cli("workflows", "approve", "w-1", "ok", "--by", "bob")
    assert code == 1 and err.startswith("error: 'bob' may not decide 'ok'")
    approved = cli.json("workflows", "approve", "w-1", "ok", "--by", "ada", "--comment", "fine")
    assert approved["activities"]["ok"]["status"] in ("waiting", "completed")
    assert cli.json("run", str(waits), "--id", "w-1")["status"] == "completed"

    code, out, _ = cli("workflows", "show", "w-1")
    assert code == 0 and "completed" in out and "waits" in out
    history = cli.json("workflows", "history", "w-1")
    assert history[0]["type"] == "ExecutionStarted" and history[-1]["type"] == "ExecutionCompleted"
    code, out, _ = cli("workflows", "history", "w-1", "--after", "2", "--limit", "3")
    assert code == 0 and "ExecutionStarted" not in out
    listed = cli.json("workflows", "list", "--workflow", "waits", "--status", "completed")
    assert [item["id"] for item in listed["items"]] == ["w-1"]
    code, out, _ = cli("workflows", "list", "--limit", "1")
    assert code == 0 and "w-1" in out


def test_reject_and_cancel(cli: Cli, waits: Path) -> None:
    assert cli("run", str(waits), "--id", "r-1")[0] == 3
    cli("workflows", "signal", "r-1", "go")
    assert cli("run", str(waits), "--id", "r-1")[0] == 3
    rejected = cli.json("workflows", "approve", "r-1", "ok", "--reject", "--by", "ada")
    assert rejected["activities"]["ok"]["status"] in ("waiting", "failed")
    assert cli("run", str(waits), "--id", "r-1")[0] == 1  # the rejection failed the workflow

    assert cli("run", str(waits), "--id", "c-1")[0] == 3
    cancelled = cli.json("workflows", "cancel", "c-1", "--reason", "test")
    assert cancelled["status"] == "cancelled"
    code, _, err = cli("workflows", "cancel", "c-1")
    assert code == 1 and "already cancelled" in err
    code, _, err = cli("workflows", "signal", "c-1", "go")
    assert code == 1 and "already cancelled" in err


def test_user_errors_exit_1_or_2_with_a_message(cli: Cli, tmp_path: Path) -> None:
    code, _, err = cli("workflows", "show", "nope")
    assert code == 4 and err == "error: execution nope not found\n"
    code, _, err = cli("run", str(HELLO), "--input-file", str(tmp_path / "missing.json"))
    assert code == 1 and err.startswith("error: cannot read inputs from")
    listed = tmp_path / "list.json"
    listed.write_text("[1, 2]")
    code, _, err = cli("run", str(HELLO), "--input-file", str(listed))
    assert code == 1 and "must hold a JSON object" in err
    code, _, err = cli("run", str(tmp_path / "absent.yaml"))
    assert code == 1 and "cannot read the file" in err
    code, _, err = cli("run", str(HELLO), "-i", "no-equals-sign")
    assert code == 2 and "expected KEY=VALUE, got 'no-equals-sign'" in err
    code, _, err = cli("run", str(HELLO), "--id", "bad id!")
    assert code == 1 and "execution ids are" in err
    code, _, err = cli("workflows", "list", "--limit", "0")
    assert code == 2


def test_definitions_apply_list_show(cli: Cli, waits: Path) -> None:
    code, out, _ = cli("definitions", "apply", str(waits), str(HELLO))
    assert code == 0 and "waits" in out and "hello" in out
    listed = cli.json("definitions", "list")
    assert {d["name"] for d in listed} >= {"waits", "hello"}
    code, out, _ = cli("definitions", "show", "waits")
    assert code == 0 and '"waits"' in out
    code, _, err = cli("definitions", "show", "nobody")
    assert code == 4 and err.startswith("error: ")


def test_schedules_from_create_to_delete(cli: Cli) -> None:
    made = cli.json(
        "schedules", "create", "nightly", "--file", str(HELLO), "--cron", "0 3 * * *",
        "--tz", "Europe/Paris", "-i", "name=cron", "--note", "n",
    )  # fmt: skip
    assert made["id"] == "nightly"
    every = cli.json("schedules", "create", "often", "--file", str(HELLO), "--every", "15m")
    assert every["id"] == "often"
    code, out, _ = cli("schedules", "list")
    assert code == 0 and "nightly" in out and "often" in out
    shown = cli.json("schedules", "show", "nightly")
    assert shown["id"] == "nightly"
    code, out, _ = cli("schedules", "show", "often")
    assert code == 0 and "often" in out
    assert cli("schedules", "pause", "often", "--note", "quiet")[0] == 0
    assert cli.json("schedules", "show", "often")["paused"] is True
    assert cli("schedules", "resume", "often")[0] == 0
    assert cli.json("schedules", "show", "often")["paused"] is False
    assert cli("schedules", "update", "often", "--every", "1h", "--overlap", "allow_all")[0] == 0
    assert cli.json("schedules", "show", "often")["overlap"] == "allow_all"
    code, out, _ = cli("schedules", "trigger", "often")
    assert code == 0 and out
    code, out, _ = cli(
        "schedules", "backfill", "often",
        "--start", "2030-01-01T00:00:00Z", "--end", "2030-01-01T03:00:00Z",
    )  # fmt: skip
    assert code == 0 and out
    assert len(cli.json("workflows", "list", "--workflow", "hello")["items"]) >= 4
    code, _, err = cli("schedules", "create", "often", "--file", str(HELLO), "--every", "1h")
    assert code == 1 and err.startswith("error: ")
    code, _, err = cli("schedules", "create", "bad", "--file", str(HELLO))
    assert code in (1, 2) and err
    assert cli("schedules", "delete", "often")[0] == 0
    code, _, err = cli("schedules", "show", "often")
    assert code == 4 and "not found" in err
