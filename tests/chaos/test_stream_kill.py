"""SIGKILL the worker process in the middle of a streamed model answer while an SSE client
reads the execution's stream: the client sees the first attempt's text as far as it was
sent, then an attempt marker, then the retried answer whole (what the output holds), and
the stream ends `completed`: never a silent splice of two answers."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from tests.sse import Message, messages

from wovyr.engine.engine import Engine
from wovyr.settings import Settings
from wovyr.store.sqlite import SQLiteStore
from wovyr.testing.model_server import ScriptedLLM, text

WORKER = Path(__file__).with_name("stream_worker.py")
LEASE = 1.0
ANSWER = "".join(f"w{i:03d}" for i in range(300))  # 300 pieces of 4 characters
FLOW = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: talk}
activities:
  - id: ask
    llm: {model: m1, prompt: "go", stream: true}
    retry: {max_attempts: 3, initial_interval: 0s}
output: "${{ activities.ask.output.text }}"
"""
DEADLINE = 60.0


def _wait_until(check: Callable[[], bool], what: str) -> None:
    end = time.monotonic() + DEADLINE
    while not check():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def _worker(db: Path, base_url: str) -> subprocess.Popen[bytes]:
    src = Path(__file__).resolve().parents[2]
    return subprocess.Popen(
        [sys.executable, str(WORKER), str(db), str(LEASE), base_url],
        cwd=src,
        env={"PYTHONPATH": f"{src / 'src'}:{src}", "PATH": "/usr/bin:/bin"},
    )


@pytest.mark.slow
def test_a_killed_generation_is_followed_by_a_marked_retry(tmp_path: Path) -> None:
    import socket

    import uvicorn

    from wovyr.server.app import create_app

    db = tmp_path / "wovyr.db"
    engine = Engine(SQLiteStore(db))
    with ScriptedLLM([text(ANSWER, stream=True, chunk_delay=0.01)]) as llm:
        record = engine.for_tenant("acme").start(FLOW)
        app = create_app(engine, Settings(home=tmp_path / "home"), start_background=False)
        key = app.state.authenticator.create_key("acme", "viewer", "watcher")[1]
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
        )
        serving = threading.Thread(target=server.run, daemon=True)
        serving.start()
        _wait_until(lambda: server.started, "the server to start")

        seen: list[Message] = []

        def read() -> None:
            url = f"http://127.0.0.1:{port}/api/v1/workflows/{record.id}/stream"
            headers = {"Authorization": f"Bearer {key}"}
            with (
                httpx.Client(timeout=DEADLINE) as client,
                client.stream("GET", url, headers=headers) as response,
            ):
                for message in messages(response):
                    seen.append(message)
                    if message.event == "end":
                        return

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        first = _worker(db, llm.base_url)
        second = None
        try:
            _wait_until(
                lambda: sum(m.event == "token" for m in seen) >= 40, "the first attempt's text"
            )
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=10)
            sent_before_kill = sum(m.event == "token" for m in seen)
            second = _worker(db, llm.base_url)
            reader.join(timeout=DEADLINE)
            assert not reader.is_alive(), "the stream did not end"
            assert second.wait(timeout=DEADLINE) == 0
        finally:
            for process in (first, second):
                if process is not None and process.poll() is None:
                    process.kill()
                    process.wait()
            server.should_exit = True
            serving.join(timeout=15)

    assert seen[-1].event == "end" and seen[-1].data == {"status": "completed"}
    markers = [i for i, m in enumerate(seen) if m.event == "attempt"]
    # the lost attempt is run again (same attempt, its recovery counted), marked as such
    assert [(seen[i].data["attempt"], seen[i].data["recovery"]) for i in markers] == [
        (1, 0),
        (1, 1),
    ]
    before = [m.data for m in seen[markers[0] : markers[1]] if m.event == "token"]
    after = [m.data for m in seen[markers[1] :] if m.event == "token"]
    assert {t["recovery"] for t in before} == {0} and {t["recovery"] for t in after} == {1}
    cut = "".join(t["text"] for t in before)
    assert sent_before_kill <= len(before) < 300
    assert ANSWER.startswith(cut)  # the first attempt, as far as it went
    assert "".join(t["text"] for t in after) == ANSWER  # the retry, whole
    assert engine.for_tenant("acme").query(record.id).output == ANSWER
    journaled = SQLiteStore(db).read_stream("acme", record.id, 0, 10_000)
    assert [c.text for c in journaled if c.kind == "text" and c.recovery == 0] == [
        t["text"] for t in before
    ]  # the client saw exactly what the dead worker journaled
    engine.close()
