"""The CLI against the handlers loaded with `--activities`: `wovyr validate -a MOD` reports
tools with no handler and `with:` keys that do not fit it, located in the file; a foreground
`wovyr run` refuses to start on them (nothing runs, nothing is stored); and `wovyr
workflows show` prints a failed handler's traceback as Python prints it."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from wovyr.cli.main import main

ACTIVITIES = textwrap.dedent("""
    from pathlib import Path

    import wovyr


    @wovyr.activity("cli.touch")
    def touch(path: str) -> str:
        Path(path).write_text("ran")
        return path


    @wovyr.activity("cli.greet")
    def greet(name: str, ctx: wovyr.ActivityContext, greeting: str = "Hello") -> str:
        return f"{greeting}, {name}"


    def _check(amount: int) -> int:
        raise ValueError(f"amount {amount} is over the limit")


    @wovyr.activity("cli.charge")
    def charge(amount: int) -> int:
        return _check(amount)
    """)


def workflow(body: str) -> str:
    head = "apiVersion: wovyr/v1\nkind: Workflow\nmetadata: {name: handlers}\n"
    return head + textwrap.dedent(body)


class Cli:
    def __init__(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.tmp_path = tmp_path
        self.capsys = capsys
        self.activities = tmp_path / "cli_handlers.py"
        self.activities.write_text(ACTIVITIES)

    def __call__(self, *args: str) -> tuple[int, str, str]:
        self.capsys.readouterr()
        code = main(list(args))
        out, err = self.capsys.readouterr()
        return code, out, err

    def store(self) -> list[str]:
        return ["--home", str(self.tmp_path / "home")]

    def file(self, name: str, text: str) -> str:
        path = self.tmp_path / name
        path.write_text(text)
        return str(path)


@pytest.fixture
def cli(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    fresh_registry: None,
) -> Cli:
    # the handlers register in the default registry: each test starts with it empty and no
    # activity file loaded, as a fresh `wovyr` process has them (other tests of this worker may
    # have loaded examples' handlers, which the listing of registered names would show)
    monkeypatch.delenv("WOVYR_DATABASE_URL", raising=False)
    monkeypatch.setenv("COLUMNS", "200")
    return Cli(tmp_path, capsys)


BAD = workflow("""
    activities:
      - id: first
        tool: cli.touch
        with: {path: "${{ inputs.marker }}"}
        compensate:
          tool: cli.untouch
          with: {path: "${{ inputs.marker }}.undone"}
      - id: hello
        needs: [first]
        tool: cli.greet
        with:
          nmae: Ada
      - id: charge
        needs: [hello]
        tool: cli.chrage
        with: {amount: 3}
        retry: {max_attempts: 1}
    inputs:
      marker: {type: string}
    """)


def test_validate_with_activities_reports_unknown_tools_and_keys_at_their_lines(
    cli: Cli,
) -> None:
    path = cli.file("bad.yaml", BAD)
    code, out, _ = cli("validate", path)
    assert code == 0 and out.strip() == f"{path}: ok"  # the document itself is valid
    code, out, err = cli("validate", path, "-a", str(cli.activities))
    assert code == 1, (out, err)
    lines = out.strip().splitlines()
    assert lines == [
        f"{path}:10:7: no activity handler is registered as 'cli.untouch' "
        "(at activities[0].compensate.tool); did you mean 'cli.touch'? registered: "
        "cli.charge, cli.greet, cli.touch; load modules with --activities",
        f"{path}:15:5: tool 'cli.greet' needs input 'name' (at activities[1].with); "
        "it takes: name, greeting (optional)",
        f"{path}:16:7: tool 'cli.greet' takes no input 'nmae' (did you mean 'name'?) "
        "(at activities[1].with.nmae); it takes: name, greeting (optional)",
        f"{path}:19:5: no activity handler is registered as 'cli.chrage' "
        "(at activities[2].tool); did you mean 'cli.charge'? registered: cli.charge, "
        "cli.greet, cli.touch; load modules with --activities",
    ]
    code, out, _ = cli("validate", path, "-a", str(cli.activities), "--json")
    problems = json.loads(out)
    assert code == 1 and [p["path"] for p in problems] == [
        "activities[0].compensate.tool",
        "activities[1].with",
        "activities[1].with.nmae",
        "activities[2].tool",
    ]


def test_a_foreground_run_refuses_to_start_before_anything_runs(cli: Cli) -> None:
    marker = cli.tmp_path / "first-ran"
    path = cli.file("bad.yaml", BAD)
    run = ["run", path, "-a", str(cli.activities), "-i", f"marker={marker}", *cli.store()]
    code, out, err = cli(*run)
    assert code == 1, (out, err)
    assert "cli.untouch" in err and "cli.chrage" in err and "'nmae'" in err
    assert not marker.exists()  # the first activity never ran
    code, out, _ = cli("workflows", "list", "--json", *cli.store())
    assert code == 0 and json.loads(out)["items"] == []

    good = cli.file("good.yaml", BAD.replace("cli.untouch", "cli.touch").replace("nmae", "name"))
    good = cli.file("good.yaml", Path(good).read_text().replace("cli.chrage", "cli.charge"))
    code, out, err = cli("validate", good, "-a", str(cli.activities))
    assert code == 0, out
    registered = ["run", good, "-a", str(cli.activities), "-i", f"marker={marker}"]
    code, out, err = cli(*registered, *cli.store(), "--json")
    assert code == 1 and marker.exists()  # it ran, and failed in cli.charge's own code
    assert json.loads(out)["error"]["error"]["type"] == "ValueError"


def test_show_prints_the_handlers_traceback(cli: Cli) -> None:
    path = cli.file(
        "charge.yaml",
        workflow("""
            activities:
              - id: charge
                tool: cli.charge
                with: {amount: 500}
                retry: {max_attempts: 1}
            """),
    )
    code, out, err = cli("run", path, "-a", str(cli.activities), "--json", *cli.store())
    assert code == 1, (out, err)
    execution_id = json.loads(out)["id"]
    code, out, _ = cli("workflows", "show", execution_id, *cli.store())
    assert code == 0
    assert "traceback of charge:\nTraceback (most recent call last):\n" in out
    assert "in charge\n    return _check(amount)\n" in out and "in _check\n" in out
    assert "ValueError: amount 500 is over the limit" in out
    assert '"traceback"' not in out and "\\n" not in out  # not as an escaped JSON string
    code, out, _ = cli("workflows", "show", execution_id, "--json", *cli.store())
    shown: dict[str, Any] = json.loads(out)
    assert "in _check\n" in shown["activities"]["charge"]["error"]["traceback"]
