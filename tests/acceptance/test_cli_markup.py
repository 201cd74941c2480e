"""What users and workflows write is printed as written: labels, ids, outputs and error texts
that look like Rich markup (`[small]`, `job[red]`, a stray `[/red]`, `:smile:`) reach the
human output of `run`, `workflows list|show|history|logs|rerun` unchanged, on this host's
store and through a live `wovyr serve`, and no command crashes on them."""

from __future__ import annotations

import itertools
import json
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .test_cli_both_ways import Cli, Server, cli

__all__ = ["cli"]  # the local and through-a-server fixture, with this module's server

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

TOOLS = str(Path(__file__).with_name("markup_activities.py"))
FLOW = textwrap.dedent("""
    apiVersion: wovyr/v1
    kind: Workflow
    metadata: {name: markup, version: "1"}
    inputs:
      t: {type: string, required: true}
      fail: {type: boolean, default: false}
    labels: {tag: "${{ inputs.t }}"}
    activities:
      - {id: echo, set: {t: "${{ inputs.t }}"}}
      - id: boom
        needs: [echo]
        when: "${{ inputs.fail }}"
        tool: markup.fail
        with: {text: "${{ inputs.t }}"}
    output: {t: "${{ activities.echo.output.t }}"}
    """)

# Pieces that Rich would read as markup, escapes or emoji, and a few that need more than
# one byte or one column.
PIECES = [
    "[", "]", "[/]", "[/red]", "[red]", "[bold]", "[small]", "[met-no]", "job[red]",
    "[link=https://x.example]", "[/link]", "[@click]", "[i]x[/i]", ":smile:", ":red_heart:",
    "\\", "\\[", "[b]", "é", "日本",
]  # fmt: skip
MARKUPISH = (
    st.lists(
        st.sampled_from(PIECES) | st.text(alphabet="[]/\\:=@ abXY", min_size=1, max_size=6),
        min_size=1,
        max_size=4,
    )
    .map(lambda parts: "".join(parts).strip())
    # short enough that no table cell (output 60 characters, event data 80) cuts it
    .filter(lambda text: text != "" and len(json.dumps(text, ensure_ascii=False)) <= 22)
)
# ids may hold brackets (a map item's child is `parent[3]`), not `/` or spaces
ID_SUFFIXES = st.lists(
    st.sampled_from(["[red]", "[small]", "[met-no]", "[b]", "]", "[", ":x", "-", ".", "y"]),
    max_size=3,
).map("".join)
COUNTER = itertools.count()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    served = Server(tmp_path_factory.mktemp("served") / "home", activities=(TOOLS,))
    yield served
    served.stop()


def _start(cli: Cli, flow: Path, execution_id: str, inputs: dict[str, object]) -> str:
    """Start and settle an execution; locally `wovyr run`'s own output is returned."""
    if cli.server is None:
        given = flow.with_name(f"inputs-{next(COUNTER)}.json")
        given.write_text(json.dumps(inputs))
        code, out, err = cli(
            "run", str(flow), "-a", TOOLS, "--input-file", str(given), "--id", execution_id
        )
        assert code == (1 if inputs.get("fail") else 0), (out, err)
        return out
    with cli.client() as client:
        client.start_workflow(flow.read_text(), id=execution_id, input=inputs)
    cli.settle(execution_id, lambda view: view["status"] not in ("running", "waiting"))
    return ""


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(text=MARKUPISH, suffix=ID_SUFFIXES)
def test_markup_like_values_are_printed_as_written(
    cli: Cli, tmp_path: Path, text: str, suffix: str
) -> None:
    cli.handler_tracebacks = True  # the tool's failure is the point
    flow = tmp_path / "markup.yaml"
    flow.write_text(FLOW)
    ok, bad = f"m{next(COUNTER)}{suffix}", f"m{next(COUNTER)}{suffix}"
    as_json, in_table = json.dumps(text), json.dumps(text, ensure_ascii=False)

    ran = _start(cli, flow, ok, {"t": text})
    failed = _start(cli, flow, bad, {"t": text, "fail": True})
    if cli.server is None:  # `wovyr run` is local only
        assert f"execution {ok} (markup v1): completed" in ran
        assert in_table in ran and f'"t": {as_json}' in ran
        assert f"execution {bad} (markup v1): failed" in failed and as_json in failed

    code, out, err = cli("workflows", "list", "--limit", "2")
    assert code == 0, err
    rows = out.split("\n\n")[0].splitlines()[1:]  # the table, then `more: --cursor ...`
    assert [row.split()[0] for row in rows] == [bad, ok]
    assert all(row.rstrip().endswith(f"tag={text}") for row in rows), out

    code, out, err = cli("workflows", "show", ok)
    assert code == 0, err
    assert out.startswith(f"{ok}  markup v1  completed")
    assert f"labels: tag={text}\n" in out
    assert f'{{"t": {in_table}}}' in out  # the activities table
    assert f'output: {{"t": {as_json}}}\n' in out

    code, out, err = cli("workflows", "show", bad)
    assert code == 0, err
    assert out.startswith(f"{bad}  markup v1  failed")
    assert f'"message": {in_table}' in out  # the activities table
    assert f'"message": {as_json}' in out.split("\nerror: ")[1]

    code, out, err = cli("workflows", "history", ok)
    assert code == 0, err
    assert f'"output": {{"t": {in_table}}}}}' in out

    code, out, err = cli("workflows", "logs", bad)
    assert code == 0, err
    assert "── boom attempt 1: failed" in out and f"  error: Refused: {text}\n" in out

    code, out, err = cli("workflows", "rerun", ok, "--id", f"{ok}-r")
    assert code == 0, err
    assert out.startswith(f"{ok}-r reruns {ok}; status ")
