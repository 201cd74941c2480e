"""`GET /api/v1/workflows/{id}/stream` over a real uvicorn server, on SQLite and PostgreSQL: an
SSE client reads a 500-token streamed answer, disconnects at random points and reconnects
with `Last-Event-ID`; what it read, concatenated, is the final answer exactly, with no
message twice, whether the model streamed it as chat-completions chunks or as the Anthropic
Messages API's events. Another tenant's stream answers like a missing one."""

from __future__ import annotations

import random
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import httpx
import pytest
from tests.conftest import make_store
from tests.sse import Message, messages

from wovyr.activities.base import ActivityRegistry
from wovyr.activities.policy import TRUSTED
from wovyr.activities.providers import ProviderConfig, Providers
from wovyr.engine.engine import Engine
from wovyr.server.streams import StreamHub
from wovyr.settings import Settings
from wovyr.testing.model_server import ScriptedLLM, text

ANSWER = "".join(f"t{i:03d}" for i in range(500))  # 500 pieces of 4 characters
FLOW = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: talk}
activities:
  - id: ask
    llm: {model: m1, prompt: "go", stream: true}
output: "${{ activities.ask.output.text }}"
"""
DEADLINE = 30.0


def _wait_until(check: Callable[[], bool], what: str) -> None:
    end = time.monotonic() + DEADLINE
    while not check():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Live:
    url: str
    engine: Engine
    keys: dict[str, str]
    hub: StreamHub

    def headers(self, who: str, last: str | None = None) -> dict[str, str]:
        out = {"Authorization": f"Bearer {self.keys[who]}"}
        if last is not None:
            out["Last-Event-ID"] = last
        return out


@pytest.fixture
def llm() -> Iterator[ScriptedLLM]:
    with ScriptedLLM([text(ANSWER, stream=True, chunk_delay=0.002)]) as server:
        yield server


@pytest.fixture
def provider_kind() -> str:
    """The protocol the model speaks (a test parametrizes it to change it)."""
    return "openai"


@pytest.fixture(params=["sqlite", "postgres"])
def live(
    request: pytest.FixtureRequest, tmp_path: Path, llm: ScriptedLLM, provider_kind: str
) -> Iterator[Live]:
    import uvicorn

    from wovyr.server.app import create_app

    url = request.getfixturevalue("migrated_postgres_url") if request.param == "postgres" else None
    store = make_store(request.param, tmp_path, url)
    kind: Literal["openai", "anthropic"] = "anthropic" if provider_kind == "anthropic" else "openai"
    engine = Engine(
        store,
        activities=ActivityRegistry(),
        providers=Providers({"default": ProviderConfig("default", llm.base_url, kind=kind)}),
        side_effects=TRUSTED,  # the tenants may reach the model on 127.0.0.1
    )
    settings = Settings(home=tmp_path / "home", dispatch_interval=0.05, poll_interval=0.05)
    app = create_app(engine, settings)
    keys = {
        "a": app.state.authenticator.create_key("tenant-a", "viewer", "a")[1],
        "b": app.state.authenticator.create_key("tenant-b", "viewer", "b")[1],
    }
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, name="wovyr-stream-server", daemon=True)
    thread.start()
    _wait_until(lambda: server.started, "the server to start")
    try:
        yield Live(f"http://127.0.0.1:{port}", engine, keys, app.state.wovyr.streams)
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        store.close()


def _read(live: Live, execution_id: str, last: str | None, stop_after: int | None) -> list[Message]:
    """Messages until `end`, or until `stop_after` of them (then disconnect)."""
    got: list[Message] = []
    url = f"{live.url}/api/v1/workflows/{execution_id}/stream"
    with (
        httpx.Client(timeout=DEADLINE) as client,
        client.stream("GET", url, headers=live.headers("a", last)) as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        for message in messages(response):
            got.append(message)
            if message.event == "end" or len(got) == stop_after:
                break
    return got


@pytest.mark.parametrize("provider_kind", ["openai", "anthropic"])
def test_reconnects_with_last_event_id_lose_and_repeat_nothing(live: Live) -> None:
    """Either protocol's stream (chat-completions chunks, the Messages API's events)."""
    record = live.engine.for_tenant("tenant-a").start(FLOW)
    rng = random.Random()
    seen: list[Message] = []
    last: str | None = None
    cuts = sorted(rng.sample(range(5, 500), 2))
    for cut in [*cuts, None]:
        part = _read(live, record.id, last, None if cut is None else cut - len(seen))
        seen += part
        last = part[-1].id
        if part[-1].event == "end":
            break
    assert seen[-1].event == "end" and seen[-1].data == {"status": "completed"}
    ids = [m.id for m in seen[:-1]]  # `end` repeats the position of the last message
    assert len(set(ids)) == len(ids) and seen[-1].id == ids[-1]  # no message twice
    tokens = [m.data for m in seen if m.event == "token"]
    markers = [m.data for m in seen if m.event == "attempt"]
    assert markers == [{"activity": "ask", "attempt": 1, "recovery": 0, "turn": 1}]
    assert "".join(t["text"] for t in tokens) == ANSWER
    assert len(tokens) == 500
    output = live.engine.for_tenant("tenant-a").query(record.id).output
    assert "".join(t["text"] for t in tokens) == output
    events = [m.data["seq"] for m in seen if m.event == "event"]
    assert events == list(range(1, len(events) + 1))  # every event once, in order
    assert seen[-2].event == "event" and seen[-2].data["type"] == "ExecutionCompleted"
    _wait_until(lambda: not live.hub.followers, "the followers to stop with their readers")


def test_readers_share_one_follower_and_late_ones_catch_up(live: Live) -> None:
    """Three readers of one execution, on a hub whose buffer holds 16 messages: one from the
    start, two joining later from the beginning (read from the store until they reach the
    buffer, or fall behind it and catch up again). All read the whole answer; one follower
    served them."""
    live.hub.capacity = 16
    record = live.engine.for_tenant("tenant-a").start(FLOW)
    results: dict[int, list[Message]] = {}
    followers: list[int] = []

    def reader(n: int) -> None:
        results[n] = _read(live, record.id, None, None)

    first = threading.Thread(target=reader, args=(0,))
    first.start()
    _wait_until(lambda: bool(live.hub.followers), "the first reader")
    follower = next(iter(live.hub.followers.values()))
    _wait_until(lambda: follower.next > 100, "some of the answer")
    late = [threading.Thread(target=reader, args=(n,)) for n in (1, 2)]
    for thread in late:
        thread.start()
    _wait_until(lambda: follower.readers == 3 or 0 in results, "the late readers")
    followers.append(len(live.hub.followers))
    for thread in [first, *late]:
        thread.join(timeout=DEADLINE)
    assert followers == [1]
    for seen in results.values():
        assert seen[-1].event == "end"
        ids = [m.id for m in seen[:-1]]
        assert len(set(ids)) == len(ids)
        assert "".join(m.data["text"] for m in seen if m.event == "token") == ANSWER
    assert follower.first > 0  # the buffer moved on: the late readers caught up from the store


def test_another_tenants_stream_is_not_found(live: Live) -> None:
    record = live.engine.for_tenant("tenant-a").start(FLOW)
    url = f"{live.url}/api/v1/workflows/{record.id}/stream"
    with httpx.Client(timeout=DEADLINE) as client:
        theirs = client.get(url, headers=live.headers("b"))
        missing = client.get(f"{live.url}/api/v1/workflows/nope/stream", headers=live.headers("b"))
        anonymous = client.get(url)
        bad = client.get(url, headers=live.headers("a", "not-an-id"))
    assert theirs.status_code == missing.status_code == 404
    assert theirs.json()["detail"].replace(record.id, "X") == missing.json()["detail"].replace(
        "nope", "X"
    )
    assert anonymous.status_code == 401
    assert bad.status_code == 400
