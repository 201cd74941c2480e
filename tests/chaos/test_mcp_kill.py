"""SIGKILL a real worker process while an agent's MCP tool call is inside a real MCP
server (tests/mcp_server.py over stdio, started by the worker): the next worker records a
new attempt of the activity before it runs again (`ActivityStarted` with `recovery: 1`: the
same attempt number and idempotency key, as DESIGN.md section 4 has it), does not ask the
model again for the recorded turn, makes the tool call again - once - and records it after
that recovery; the run completes."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from wovyr.engine.engine import Engine
from wovyr.platform.mcp import add_mcp_server, parse_mcp_server
from wovyr.store.sqlite import SQLiteStore
from wovyr.testing.model_server import ScriptedLLM, text, tool_calls

WORKER = Path(__file__).with_name("mcp_worker.py")
SERVER = Path(__file__).parents[1] / "mcp_server.py"
LEASE = 1.0
AGENT = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: noter}
activities:
  - id: loop
    agent:
      model: m1
      input: note it
      tools: ["mcp:notes"]
    retry: {max_attempts: 3, initial_interval: 0s}
    timeout: 2m
output: "${{ activities.loop.output }}"
"""


def _worker(db: Path, llm: ScriptedLLM) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, str(WORKER), str(db), str(LEASE), llm.base_url])


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_sigkill_mid_mcp_call_reruns_it_once_as_a_new_attempt(tmp_path: Path) -> None:
    db, calls = tmp_path / "w.db", tmp_path / "calls.log"
    engine = Engine(SQLiteStore(db))
    command = [sys.executable, str(SERVER), "--calls", str(calls), "--delay", "3"]
    record = parse_mcp_server(
        engine.tenant, "notes", {"command": command}, policy=engine.side_effect_policy(),
        by="test", at=engine.clock.now(),
    )  # fmt: skip
    add_mcp_server(engine.store, record)
    engine.start(AGENT, execution_id="r1")
    script = [tool_calls(("notes_record", {"note": "once"})), text("noted")]
    with ScriptedLLM(script, pick="turn") as llm:
        first = _worker(db, llm)
        deadline = time.monotonic() + 120
        while not (calls.exists() and calls.read_text()):  # the call is inside the tool
            assert first.poll() is None, "the worker exited before the tool call"
            assert time.monotonic() < deadline, "the tool was never called"
            time.sleep(0.01)
        first.send_signal(signal.SIGKILL)
        first.wait()
        kinds = [e.type for e in engine.history("r1")]
        assert "ToolCallCompleted" not in kinds  # killed mid-call: nothing recorded
        second = _worker(db, llm)
        assert second.wait(timeout=240) == 0
        turns = [request.turn for request in llm.completions]

    view = engine.query("r1")
    assert view.status == "completed", view.activities["loop"]
    assert view.output["text"] == "noted"
    history = [(e.type, e.data) for e in engine.history("r1")]
    kinds = [t for t, _ in history]
    # the lost attempt is run again (same attempt, same key), recorded first as a recovery
    started = [(d["attempt"], d.get("recovery")) for t, d in history if t == "ActivityStarted"]
    assert started == [(1, None), (1, 1)]
    rerun = max(i for i, t in enumerate(kinds) if t == "ActivityStarted")
    (tool,) = [d for t, d in history if t == "ToolCallCompleted"]
    assert kinds.index("ToolCallCompleted") > rerun  # made by the recovery, recorded once
    assert kinds.index("ModelCallCompleted") < rerun  # turn 1 was recorded before the kill
    assert tool["tool"] == "mcp:notes/record"
    assert tool["result"] == {"result": "noted once"}
    made = calls.read_text().splitlines()
    assert [line.split()[0] for line in made] == ["once", "once"]  # again, exactly once
    assert made[0].split()[1] != made[1].split()[1]  # by two server processes
    assert turns == [0, 1]  # the recorded model call was not made again
    engine.close()
