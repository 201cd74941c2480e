"""`wovyr workflows list` shows `waiting` as a status of its own, filters by it, and says
what a parent waits on (its children by id, not an approval)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from wovyr.cli.main import main

LINE = textwrap.dedent("""
    apiVersion: wovyr/v1
    kind: Workflow
    metadata: {name: line}
    activities:
      - {id: hold, wait: {signal: go}}
    """)
ORDER = textwrap.dedent("""
    apiVersion: wovyr/v1
    kind: Workflow
    metadata: {name: order}
    activities:
      - {id: line_widget, workflow: {name: line}}
      - {id: line_gadget, workflow: {name: line}}
    """)


def test_list_shows_and_filters_waiting_and_what_a_parent_waits_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("WOVYR_DATABASE_URL", raising=False)
    monkeypatch.setenv("COLUMNS", "250")
    home = ["--home", str(tmp_path / "home")]
    (tmp_path / "line.yaml").write_text(LINE)
    (tmp_path / "order.yaml").write_text(ORDER)

    def wovyr(*args: str) -> str:
        capsys.readouterr()
        main([*args, *home])
        return capsys.readouterr().out

    wovyr("definitions", "apply", str(tmp_path / "line.yaml"))
    wovyr("run", str(tmp_path / "order.yaml"), "--id", "o1")
    wovyr("run", str(tmp_path / "order.yaml"), "--id", "o2", "--detach")  # not driven yet
    kids = "child o1::line_widget; child o1::line_gadget"

    def listed(*args: str) -> dict[str, dict[str, str]]:
        items = json.loads(wovyr("workflows", "list", "--json", *args))["items"]
        return {item["id"]: item for item in items}

    everything = listed()
    assert everything["o1"]["status"] == "waiting" and everything["o1"]["waiting_on"] == kids
    assert everything["o2"]["status"] == "running" and everything["o2"]["waiting_on"] is None
    assert set(listed("--status", "waiting")) == {"o1", "o1::line_widget", "o1::line_gadget"}
    assert set(listed("--status", "running")) == {"o2"}
    table = wovyr("workflows", "list").splitlines()
    row = next(line for line in table if line.startswith("o1 "))
    assert "waiting" in row and "child o1::line_widget" in row and "approval" not in row
