"""`wovyr workflows watch ID` follows an execution in the terminal: started before the run,
it prints the streamed answer's text as it is journaled and every event, and exits 0 when
the execution completed (4 for an unknown id)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from wovyr.activities.base import ActivityRegistry
from wovyr.activities.providers import ProviderConfig, Providers
from wovyr.engine.engine import Engine
from wovyr.store.sqlite import SQLiteStore
from wovyr.testing import drain
from wovyr.testing.model_server import ScriptedLLM, text

ROOT = Path(__file__).resolve().parents[2]
ANSWER = "".join(f"a{i:02d} " for i in range(60))
FLOW = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: talk}
activities:
  - id: ask
    llm: {model: m1, prompt: "go", stream: true}
output: "${{ activities.ask.output.text }}"
"""


def _watch(home: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "WOVYR_HOME": str(home)}
    env.pop("WOVYR_DATABASE_URL", None)
    return subprocess.Popen(
        [sys.executable, "-m", "wovyr", "workflows", "watch", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )


def test_watch_follows_a_streamed_answer_to_the_end(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    with ScriptedLLM([text(ANSWER, stream=True, chunk_delay=0.005)]) as llm:
        engine = Engine(
            SQLiteStore(home / "wovyr.db"),
            activities=ActivityRegistry(),
            providers=Providers({"default": ProviderConfig("default", llm.base_url)}),
        )
        record = engine.start(FLOW)
        watching = _watch(home, record.id, "--json", "--interval", "0.05")
        first = watching.stdout.readline() if watching.stdout else ""
        assert json.loads(first)["event"] == "event"  # it is following before the run
        drain(engine)
        out, err = watching.communicate(timeout=60)
        engine.close()
    assert watching.returncode == 0, err
    lines = [json.loads(line) for line in [first, *out.splitlines()]]
    assert lines[-1]["event"] == "end" and lines[-1]["data"] == {"status": "completed"}
    assert [m["data"]["attempt"] for m in lines if m["event"] == "attempt"] == [1]
    assert "".join(m["data"]["text"] for m in lines if m["event"] == "token") == ANSWER
    seqs = [m["data"]["seq"] for m in lines if m["event"] == "event"]
    assert seqs == list(range(1, len(seqs) + 1))


def test_watch_in_text_and_an_unknown_id(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    with ScriptedLLM([text("hello there", stream=True)]) as llm:
        engine = Engine(
            SQLiteStore(home / "wovyr.db"),
            activities=ActivityRegistry(),
            providers=Providers({"default": ProviderConfig("default", llm.base_url)}),
        )
        record = engine.start(FLOW)
        drain(engine)
        engine.close()
    done = _watch(home, record.id)
    out, err = done.communicate(timeout=60)
    assert done.returncode == 0, err
    assert "hello there" in out and "ExecutionCompleted" in out and "end: completed" in out
    missing = _watch(home, "nope")
    missing.communicate(timeout=60)
    assert missing.returncode == 4
