"""SIGKILL a real worker process while an agent's MCP tool call is inside a real MCP
server (`wovyr.testing.mcp_server` over stdio, started by the worker): the next worker records
a new attempt of the activity before it runs again (`ActivityStarted` with `recovery: 1`: the
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
from wovyr.store.sqlite import SQLiteStore
from wovyr.testing.mcp_server import FakeMCPServer
from wovyr.testing.model_server import ScriptedLLM, text, tool_calls

WORKER = Path(__file__).with_name("mcp_worker.py")
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
    db = tmp_path / "w.db"
    engine = Engine(SQLiteStore(db))
    script = [tool_calls(("notes_record", {"note": "once"})), text("noted")]
    # each call waits 3 s in the tool after it is recorded: the worker is killed there
    with ScriptedLLM(script, pick="turn") as llm, FakeMCPServer(delay=3) as notes:
        notes.register(engine, "notes")
        engine.start(AGENT, execution_id="r1")
        first = _worker(db, llm)
        deadline = time.monotonic() + 120
        while not notes.calls:  # the call is inside the tool
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
        made = notes.calls

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
    assert [c.arguments for c in made] == [{"note": "once"}] * 2  # again, exactly once
    assert made[0].pid != made[1].pid  # by two server processes
    assert turns == [0, 1]  # the recorded model call was not made again
    engine.close()
