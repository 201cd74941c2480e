"""`wovyr workflows logs ID [--follow]`: each attempt's lines and a failed attempt's
traceback, as text or JSON lines; --follow prints attempts as they end and returns when the
execution ends."""

from __future__ import annotations

import json
import textwrap
import threading
import time
from pathlib import Path

import pytest

from wovyr.cli.main import main
from wovyr.engine.engine import Engine
from wovyr.testing import drain

from .test_cli_in_process import Cli

TOOLS = textwrap.dedent("""
    from wovyr.activities.base import activity

    @activity("cli.noisy")
    def noisy(word: str, ctx):
        ctx.log.info("said %s on attempt %d", word, ctx.attempt)
        if ctx.attempt == 1:
            raise KeyError(word)
        return word
    """)
FLOW = textwrap.dedent("""
    apiVersion: wovyr/v1
    kind: Workflow
    metadata: {name: noisy}
    activities:
      - {id: say, tool: cli.noisy, with: {word: hi}, retry: {max_attempts: 2, initial_interval: 0}}
      - {id: go, needs: [say], wait: {signal: go}}
      - id: again
        needs: [go]
        tool: cli.noisy
        with: {word: bye}
        retry: {max_attempts: 2, initial_interval: 0}
    """)


class LogsCli(Cli):
    """`Cli`, except that a handler's traceback in the output is what `logs` shows."""

    def __call__(self, *args: str) -> tuple[int, str, str]:
        self.capsys.readouterr()
        code = main([*args, "--home", str(self.home)])
        out, err = self.capsys.readouterr()
        assert "Traceback" not in err  # the CLI itself never fails with one
        return code, out, err


@pytest.fixture
def cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> LogsCli:
    monkeypatch.delenv("WOVYR_DATABASE_URL", raising=False)
    monkeypatch.setenv("WOVYR_POLL_INTERVAL_SECONDS", "0.05")
    monkeypatch.setenv("COLUMNS", "200")
    return LogsCli(tmp_path / "home", capsys)


@pytest.fixture
def started(cli: LogsCli, tmp_path: Path) -> tuple[Path, Path]:
    tools, flow = tmp_path / "noisy_tools.py", tmp_path / "noisy.yaml"
    tools.write_text(TOOLS)
    flow.write_text(FLOW)
    code, _, err = cli("run", str(flow), "-a", str(tools), "--id", "n1", "--wait-up-to", "0")
    assert code == 3, err  # waits for the signal
    return tools, flow


def test_logs_prints_each_attempt_and_the_traceback(
    cli: LogsCli, started: tuple[Path, Path]
) -> None:
    code, out, err = cli("workflows", "logs", "n1")
    assert code == 0, err
    assert "say attempt 1: retrying" in out and "say attempt 2: completed" in out
    assert "INFO    ctx: said hi on attempt 1" in out
    assert "error: KeyError: 'hi'" in out and "raise KeyError(word)" in out
    code, out, _ = cli("workflows", "logs", "n1", "--json")
    items = [json.loads(line) for line in out.splitlines()]
    assert [(i["activity"], i["attempt"]) for i in items] == [("say", 1), ("say", 2)]
    assert cli("workflows", "logs", "nope")[0] == 4


def test_follow_prints_attempts_as_they_end_and_stops_at_the_end(
    cli: LogsCli, started: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    tools, _ = started
    capsys.readouterr()
    codes: list[int] = []
    follower = threading.Thread(
        target=lambda: codes.append(
            main(["workflows", "logs", "n1", "--follow", "--json", "--home", str(cli.home)])
        )
    )
    follower.start()
    try:
        from wovyr.activities.base import load_activity_modules

        load_activity_modules([str(tools)])
        with Engine.open(f"sqlite:///{cli.home / 'wovyr.db'}") as engine:
            deadline = time.monotonic() + 10
            while "said hi on attempt 2" not in capsys.readouterr().out:  # printed once
                assert time.monotonic() < deadline, "the first attempts were not printed"
                time.sleep(0.02)
            assert follower.is_alive()  # still following: the execution waits
            engine.signal("n1", "go")
            drain(engine)
            assert engine.query("n1").status == "completed"
    finally:
        follower.join(10)
    assert not follower.is_alive() and codes == [0]
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(i["activity"], i["attempt"]) for i in printed] == [("again", 1), ("again", 2)]
