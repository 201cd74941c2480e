"""Acceptance: a tool handler that prints a resolved secret (to stdout and stderr, whole and
in pieces) and logs it through its module's logger (in a message, URL-encoded, in an
exception's traceback) leaks no form of it into the log of the process that ran it - `wovyr
worker` and `wovyr serve` (whose worker process runs the attempt), each with text and JSON
log lines - nor into the attempt's own log, where the printed lines are kept, masked.
Waiting is bounded polling, never a fixed sleep."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from tests.acceptance.test_secrets_canary import forms
from tests.acceptance.test_worker_metrics import ROOT, free_port, wait_for, wovyr, wovyr_env

pytestmark = pytest.mark.slow

CANARY = 'lg-9c1e4f/+"&=z-ca7n'
TOOLS = textwrap.dedent("""
    import logging
    import sys
    from urllib.parse import quote

    from wovyr.activities.base import activity

    log = logging.getLogger(__name__)

    @activity("loud.token")
    def loud(token: str) -> str:
        print(f"printing {token}")
        print("in pieces:", token, "end")
        print(f"to stderr {token}", file=sys.stderr)
        log.warning("logging %s", token)
        log.warning("encoded %s", quote(token, safe=""))
        try:
            raise ValueError(f"bad token {token}")
        except ValueError:
            log.exception("it failed")
        return "done"
    """)
FLOW = textwrap.dedent("""
    apiVersion: wovyr/v1
    kind: Workflow
    metadata: {name: loud}
    activities:
      - {id: one, tool: loud.token, with: {token: "${{ secrets.CANARY }}"}}
    """)


def leaks(text: str) -> list[str]:
    return [form for form in forms(CANARY) if form in text]


@pytest.mark.parametrize("command", ["worker", "serve"])
@pytest.mark.parametrize("log_format", ["text", "json"])
def test_what_a_handler_prints_or_logs_never_shows_a_secret(
    tmp_path: Path, command: str, log_format: str
) -> None:
    home = tmp_path / "home"
    tools, flow = tmp_path / "loud_tools.py", tmp_path / "loud.yaml"
    tools.write_text(TOOLS)
    flow.write_text(FLOW)
    env = {**wovyr_env(home), "WOVYR_LOG_FORMAT": log_format, "WOVYR_KMS_ROOT_KEY": "3c" * 32}
    stored = subprocess.run(
        [sys.executable, "-m", "wovyr", "secrets", "set", "CANARY"],
        input=CANARY + "\n", capture_output=True, text=True, env=env, timeout=60, cwd=ROOT,
        check=False,
    )  # fmt: skip
    assert stored.returncode == 0, stored.stderr
    wovyr(home, "run", str(flow), "--detach", "--id", "l1")
    argv = [sys.executable, "-m", "wovyr", command, "-a", str(tools)]
    if command == "serve":
        argv += ["--port", str(free_port())]
    proc = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT
    )
    try:
        wait_for(
            lambda: '"completed"' in wovyr(home, "workflows", "show", "l1", "--json").stdout,
            90,
            f"{command} to complete l1",
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)

    assert leaks(out + err) == [], out + err
    assert "***" in err  # the masked lines are there: masked, not lost
    shown = wovyr(home, "workflows", "logs", "l1", "--json").stdout
    assert leaks(shown) == [], shown
    messages = [line["message"] for line in json.loads(shown)["lines"]]
    assert "printing ***" in messages and "to stderr ***" in messages, messages
    assert "logging ***" in messages, messages
