"""`wovyr workflows rerun` and the search flags, in-process: a rerun from an activity shows
what it reused and links both ways in `show`; `--latest` on an incompatible version exits 1
with the reason; `run --label` and `list --label/--id-prefix/--name` find the right rows."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from .test_cli_in_process import Cli

FLOW = textwrap.dedent("""
    apiVersion: wovyr/v1
    kind: Workflow
    metadata: {name: Relay-Flow, version: "%s"}
    inputs: {n: {type: integer, default: 1}}
    labels: {size: "${{ inputs.n > 5 ? 'big' : 'small' }}"}
    activities:
      - {id: a, set: {n: "${{ inputs.n }}"}}
      - {id: b, needs: [a], %s}
      - {id: c, needs: [b], wait: {signal: go}}
    """)
B_SET = 'set: {m: "${{ activities.a.output.n }}"}'


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    monkeypatch.delenv("WOVYR_DATABASE_URL", raising=False)
    monkeypatch.setenv("COLUMNS", "200")
    return Cli(tmp_path / "home", capsys)


def _apply(cli: Cli, tmp_path: Path, version: str, b: str) -> None:
    path = tmp_path / f"relay{version}.yaml"
    path.write_text(FLOW % (version, b))
    code, out, err = cli("definitions", "apply", str(path))
    assert code == 0, (out, err)


def test_rerun_from_an_activity_and_links_both_ways(cli: Cli, tmp_path: Path) -> None:
    _apply(cli, tmp_path, "1", B_SET)
    code, _, err = cli("run", "--workflow", "Relay-Flow", "--id", "r1", "--wait-up-to", "0")
    assert code == 3, err
    assert cli("workflows", "cancel", "r1")[0] == 0
    code, out, err = cli("workflows", "rerun", "r1", "--from", "c", "--id", "r2", "-i", "n=7")
    assert code == 3, err  # driven here up to its signal
    assert "r2 reruns r1" in out and "reused from r1: a, b" in out
    shown = cli.json("workflows", "show", "r2")
    assert shown["rerun_of"] == {"id": "r1", "from": "c"}
    assert shown["labels"] == {"size": "big"}  # rendered from the rerun's inputs
    assert [k for k, v in shown["activities"].items() if v["reused_from"]] == ["a", "b"]
    code, out, _ = cli("workflows", "show", "r1")
    assert "reruns: r2" in out
    code, out, _ = cli("workflows", "show", "r2")
    assert "rerun of: r1 from c" in out and "(reused)" in out

    _apply(cli, tmp_path, "2", "wait: {signal: b}")
    code, out, err = cli("workflows", "rerun", "r1", "--from", "c", "--latest")
    assert code == 1
    assert "activity 'b' is a 'wait' activity in Relay-Flow v2" in err
    code, _, err = cli("workflows", "rerun", "r1", "--from", "zz")
    assert code != 0 and "has no activity 'zz'" in err
    code, _, err = cli("workflows", "rerun", "nope")
    assert code == 4, err


def test_labels_at_start_and_the_list_search_flags(cli: Cli, tmp_path: Path) -> None:
    _apply(cli, tmp_path, "1", B_SET)
    for i, label in enumerate(["acme", "globex", "acme"]):
        code, _, err = cli(
            "run", "--workflow", "Relay-Flow", "--id", f"job-{i}", "--detach",
            "--label", f"customer={label}",
        )  # fmt: skip
        assert code == 0, err
    listed = cli.json("workflows", "list", "--label", "customer=acme")
    assert [i["id"] for i in listed["items"]] == ["job-2", "job-0"]
    assert listed["items"][0]["labels"] == {"customer": "acme", "size": "small"}
    assert [i["id"] for i in cli.json("workflows", "list", "--id-prefix", "job-1")["items"]] == [
        "job-1"
    ]
    assert len(cli.json("workflows", "list", "--name", "relay")["items"]) == 3
    assert cli.json("workflows", "list", "--name", "nothing")["items"] == []
    code, out, _ = cli("workflows", "list", "--label", "customer=globex")
    assert "job-1" in out and "customer=globex" in out and "job-0" not in out
    code, _, err = cli("workflows", "list", "--label", "nokey")
    assert code == 2 and "expected KEY=VALUE" in err
    code, _, err = cli("run", "--workflow", "Relay-Flow", "--detach", "--label", "a b=c")
    assert code == 2 and "label key 'a b' is refused" in err


def test_a_local_rerun_is_driven_here_like_run(cli: Cli, tmp_path: Path) -> None:
    """On this host's store nothing else may be running: `rerun` drives the new execution
    in the foreground, as `wovyr run` does, and says how to continue it when it waits."""
    _apply(cli, tmp_path, "1", B_SET)
    code, _, err = cli("run", "--workflow", "Relay-Flow", "--id", "d1", "-i", "n=2")
    assert code == 3, err
    assert cli("workflows", "signal", "d1", "go")[0] == 0
    assert cli("run", "--id", "d1")[0] == 0  # an existing execution, resumed by its id alone

    code, out, err = cli("workflows", "rerun", "d1", "--from", "c", "--id", "d2")
    assert code == 3, err  # it ran up to its wait: the signal is not buffered for a rerun
    assert "d2 reruns d1" in out and "reused from d1: a, b" in out
    assert "execution d2 (Relay-Flow v1): waiting" in out
    assert "wovyr workflows signal d2 go" in out and "wovyr run --id d2" in out
    assert cli("workflows", "signal", "d2", "go")[0] == 0
    code, out, err = cli("run", "--id", "d2")
    assert code == 0 and "execution d2 (Relay-Flow v1): completed" in out, err

    code, out, err = cli("workflows", "rerun", "d1", "--id", "d3", "--wait-up-to", "0", "--json")
    assert code == 3 and json.loads(out)["continue_with"].startswith("wovyr run --id d3"), err
    assert cli.json("workflows", "show", "d3")["activities"]["b"]["status"] == "completed"

    code, out, err = cli("workflows", "rerun", "d1", "--id", "d4", "--detach")
    assert code == 0 and "nothing runs it until `wovyr worker`" in out, err
    assert cli.json("workflows", "show", "d4")["activities"]["a"]["status"] == "pending"

    code, _, err = cli("run", "--id", "d9")
    assert code == 4 and "d9" in err
    code, _, err = cli("run", "--id", "d1", "-i", "n=3")
    assert code == 2 and "resumed as it is" in err
