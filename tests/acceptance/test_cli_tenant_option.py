"""The CLI acts for any tenant of the store it holds: `--tenant T` (or `WOVYR_TENANT`) on
every engine command; the default is tenant `default`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from wovyr.cli.main import main

KID = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: kid}
inputs: {n: {type: integer}}
activities:
  - {id: double, set: {v: "${{ inputs.n * 2 }}"}}
output: "${{ activities.double.output.v }}"
"""
PARENT = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: parent}
activities:
  - {id: k, workflow: {name: kid, input: {n: 21}}}
  - {id: gate, needs: [k], wait: {signal: go}}
output: "${{ activities.k.output }}"
"""


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    monkeypatch.setenv("WOVYR_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("WOVYR_TENANT", raising=False)
    monkeypatch.delenv("WOVYR_DATABASE_URL", raising=False)
    (tmp_path / "kid.yaml").write_text(KID)
    (tmp_path / "parent.yaml").write_text(PARENT)
    return tmp_path / "kid.yaml", tmp_path / "parent.yaml"


def out(capsys: pytest.CaptureFixture[str], code: int, *argv: str) -> Any:
    assert main(list(argv)) == code, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def test_a_tenant_applies_runs_by_name_with_a_child_and_signals_its_own_execution(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    kid, parent = files
    applied = out(capsys, 0, "definitions", "apply", str(kid), str(parent), "--tenant", "beta",
                  "--json")  # fmt: skip
    assert [a["result"] for a in applied] == ["applied", "applied"]

    waiting = out(capsys, 3, "run", "--workflow", "parent", "--id", "p1", "--tenant", "beta",
                  "--json")  # fmt: skip
    assert waiting["activities"]["k"]["output"] == 42  # the child resolved in tenant beta

    # tenant default sees none of it
    assert out(capsys, 0, "definitions", "list", "--json") == []
    assert out(capsys, 0, "workflows", "list", "--json")["items"] == []
    assert main(["workflows", "signal", "p1", "go"]) == 4
    assert main(["run", "--workflow", "parent"]) == 4

    monkeypatch.setenv("WOVYR_TENANT", "beta")  # the environment selects it too
    assert main(["workflows", "signal", "p1", "go"]) == 0
    capsys.readouterr()
    done = out(capsys, 0, "run", "--workflow", "parent", "--id", "p1", "--json")
    assert (done["status"], done["output"]) == ("completed", 42)
    ids = {e["id"] for e in out(capsys, 0, "workflows", "list", "--json")["items"]}
    assert ids == {"p1", "p1::k"}


def test_a_bad_tenant_is_a_usage_error(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["workflows", "list", "--tenant", "a/b"]) == 2
    assert "--tenant" in capsys.readouterr().err
