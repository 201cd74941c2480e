"""`WOVYR_LOG_FORMAT=json wovyr worker`: a real worker process logs JSON lines on stderr, and
a line a handler's module logs during an attempt names the execution, activity and attempt
(and masks nothing it was not given). Waiting is bounded polling, never a fixed sleep."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from tests.acceptance.test_worker_metrics import ROOT, wait_for, wovyr, wovyr_env

pytestmark = pytest.mark.slow

TOOLS = textwrap.dedent("""
    import logging

    from wovyr.activities.base import activity

    log = logging.getLogger(__name__)  # the module's own logger, as usual

    @activity("json.step")
    def step(n: int) -> int:
        log.warning("stepping %d", n)
        return n + 1
    """)
FLOW = textwrap.dedent("""
    apiVersion: wovyr/v1
    kind: Workflow
    metadata: {name: jsonlog}
    activities:
      - {id: one, tool: json.step, with: {n: 41}}
    """)


def test_the_worker_logs_json_lines_with_the_attempt_ids(tmp_path: Path) -> None:
    home = tmp_path / "home"
    tools, flow = tmp_path / "json_tools.py", tmp_path / "jsonlog.yaml"
    tools.write_text(TOOLS)
    flow.write_text(FLOW)
    wovyr(home, "run", str(flow), "--detach", "--id", "j1")
    env = {**wovyr_env(home), "WOVYR_LOG_FORMAT": "json"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "wovyr", "worker", "-a", str(tools)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        wait_for(
            lambda: '"completed"' in wovyr(home, "workflows", "show", "j1", "--json").stdout,
            60,
            "the worker to complete j1",
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    text = [line for line in err.splitlines() if line.strip() and not line.startswith("{")]
    assert text == [], err  # nothing but JSON lines
    lines = [json.loads(line) for line in err.splitlines() if line.strip()]
    assert lines, err
    assert all({"execution_id", "activity_id", "attempt", "tenant"} <= set(x) for x in lines)
    step = [x for x in lines if "json_tools" in x["logger"]]
    assert [(x["message"], x["execution_id"], x["activity_id"], x["attempt"]) for x in step] == [
        ("stepping 41", "j1", "one", 1)
    ]
    shown = json.loads(wovyr(home, "workflows", "logs", "j1", "--json").stdout)
    assert shown["lines"][0]["message"] == "stepping 41"  # kept with the attempt too
