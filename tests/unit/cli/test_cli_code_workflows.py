"""Workflow functions through the CLI: `wovyr validate FILE.py` runs the determinism
checker; `wovyr run --workflow NAME -a FILE.py` applies the functions the file registers and
runs one by name; `wovyr workflows show` lists the steps its function asked for."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from wovyr.cli.main import main

FLOWS = textwrap.dedent("""
    import asyncio
    import time

    import wovyr


    @wovyr.activity("cli.square")
    def square(x: int) -> int:
        return x * x


    @wovyr.workflow(name="cli-squares")
    async def squares(ctx: wovyr.Context, n: int) -> int:
        parts = await asyncio.gather(*(ctx.run(square, x=i) for i in range(n)))
        return sum(parts)


    @wovyr.workflow(name="cli-sloppy")
    async def sloppy(ctx: wovyr.Context) -> float:
        return time.time()


    @wovyr.workflow(name="cli-waiter")
    async def waiter(ctx: wovyr.Context) -> str:
        ctx.state["waiting"] = "for go"
        await ctx.signal("go")
        return "went"


    @waiter.query
    def why(q: wovyr.Query, loud: bool = False) -> str:
        text = q.state["waiting"]
        return text.upper() if loud else text
    """)


@pytest.fixture
def flows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_registry: None) -> Path:
    monkeypatch.delenv("WOVYR_DATABASE_URL", raising=False)
    monkeypatch.setenv("COLUMNS", "200")
    path = tmp_path / "cli_flows.py"
    path.write_text(FLOWS)
    return path


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_query_answers_from_the_store_with_the_module_loaded(
    flows: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = ["--home", str(tmp_path / "home")]
    code, out, _ = run(capsys, "run", "--workflow", "cli-waiter", "-a", str(flows), "--json", *home)
    assert code == 3, out  # waiting for its signal
    execution = json.loads(out)["id"]
    code, out, _ = run(
        capsys,
        "workflows",
        "query",
        execution,
        "why",
        "--arg",
        "loud=true",
        "-a",
        str(flows),
        *home,
    )
    assert code == 0, out
    assert json.loads(out) == "FOR GO"


def test_validate_names_what_a_replay_could_not_repeat(
    flows: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "validate", str(flows))
    assert code == 1
    assert out.strip() == (
        f"{flows}:21:12: workflow function time.time() reads the wall clock: use ctx.now()"
    )
    assert "1 problem(s) in 1 of 1 file(s)" in err


def test_run_by_name_applies_the_file_and_show_lists_the_steps(
    flows: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = ["--home", str(tmp_path / "home")]
    code, out, _ = run(
        capsys, "run", "--workflow", "cli-squares", "-a", str(flows), "-i", "n=3", "--json", *home
    )
    assert code == 0, out
    result = json.loads(out)
    assert result["status"] == "completed" and result["output"] == 0 + 1 + 4
    code, out, _ = run(capsys, "workflows", "show", result["id"], *home)
    assert code == 0
    assert [line.split()[:3] for line in out.splitlines() if line.startswith("square_")] == [
        ["square_1", "tool", "completed"],
        ["square_2", "tool", "completed"],
        ["square_3", "tool", "completed"],
    ]
