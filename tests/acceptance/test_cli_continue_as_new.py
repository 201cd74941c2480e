"""Continue-as-new through the `wovyr` command (real subprocesses, an embedded store): a
foreground run that continues says where the chain went and exits 3; `show` follows the
chain's logical id to its live run (`--no-follow`: the run itself), the links are in the
table and the JSON, and `list --status continued` finds the run that ended so."""

from __future__ import annotations

import json
from pathlib import Path

from tests.acceptance.test_cli import wovyr

CHAIN = """\
# yaml-language-server: $schema=../schema/wovyr-workflow.schema.json
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: chain, description: a chain of runs}
inputs: {n: {type: integer, default: 1}}
activities:
  - {id: go, wait: {signal: go}}
output: "${{ inputs.n }}"
continue_as_new: {when: "${{ inputs.n < 3 }}", input: {n: "${{ inputs.n + 1 }}"}}
"""


def test_the_cli_shows_and_follows_a_chain(tmp_path: Path) -> None:
    home, flow = tmp_path / "home", tmp_path / "chain.yaml"
    flow.write_text(CHAIN)
    started = wovyr(home, "run", str(flow), "--id", "sub", "--detach", "--json")
    assert started.returncode == 0, started.stderr
    sent = wovyr(home, "workflows", "signal", "sub", "go")
    assert sent.returncode == 0, sent.stderr
    sent = wovyr(home, "workflows", "signal", "sub", "go")  # buffered: carried to run 2
    assert sent.returncode == 0, sent.stderr

    ran = wovyr(home, "run", str(flow), "--id", "sub", "--json")  # drives run 1 here
    assert ran.returncode == 3, ran.stderr  # continued: the chain goes on
    result = json.loads(ran.stdout)
    assert (result["status"], result["continued_as"]) == ("continued", "sub~c2")
    ran = wovyr(home, "run", str(flow), "--id", "sub")
    assert ran.returncode == 3, ran.stderr
    assert "continued as sub~c2" in ran.stdout

    live = json.loads(wovyr(home, "workflows", "show", "sub", "--json").stdout)
    assert (live["id"], live["status"]) == ("sub~c2", "running")  # the carried signal is due
    assert (live["continued_from"], live["chain"]) == ("sub", {"root": "sub", "run": 2})
    own = json.loads(wovyr(home, "workflows", "show", "sub", "--no-follow", "--json").stdout)
    assert (own["id"], own["status"], own["continued_as"]) == ("sub", "continued", "sub~c2")

    table = wovyr(home, "workflows", "show", "sub", "--no-follow")
    assert table.returncode == 0, table.stderr
    assert "continued as: sub~c2" in table.stdout and "chain sub   run 1" in table.stdout
    listed = json.loads(wovyr(home, "workflows", "list", "--status", "continued", "--json").stdout)
    assert [i["id"] for i in listed["items"]] == ["sub"]
    history = json.loads(wovyr(home, "workflows", "history", "sub", "--json").stdout)
    assert history[0]["data"]["continued_from"] == "sub"
    assert [e["type"] for e in history][:2] == ["ExecutionStarted", "SignalReceived"]
