"""Streamed model answers are journaled beside the events (real SQLite, a real scripted
model server): an `llm` answer's pieces, in batches (far fewer commits than pieces), opened
by an attempt marker; an `agent` journals each turn as its own generation; a retried
attempt opens with its own marker; an answer not streamed journals nothing. The same for a
provider of `kind: anthropic`, whose answers the scripted server streams as the Messages
API's server-sent events (text deltas, a tool call's input JSON in fragments), a stream cut
mid-event or ended by an `error` event being a clear, retried failure."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from wovyr.activities.base import ActivityRegistry
from wovyr.activities.providers import ProviderConfig, Providers
from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.store.sqlite import SQLiteStore
from wovyr.testing import drain
from wovyr.testing.model_server import ScriptedLLM, raw, status, text, tool_calls

ANSWER = "".join(f"p{i:03d}" for i in range(500))  # 500 pieces


def _engine(db: Path, llm: ScriptedLLM, registry: ActivityRegistry | None = None) -> Engine:
    return Engine(
        SQLiteStore(db),
        clock=ManualClock(datetime(2030, 1, 1, 9, tzinfo=UTC)),
        activities=registry or ActivityRegistry(),
        providers=Providers({"default": ProviderConfig("default", llm.base_url)}),
    )


def _flow(step: str) -> str:
    return f"""\
apiVersion: wovyr/v1
kind: Workflow
metadata: {{name: talk}}
activities:
  - id: ask
{step}
output: "${{{{ activities.ask.output.text }}}}"
"""


LLM = _flow(
    '    llm: {model: m1, prompt: "go", stream: true}\n'
    "    retry: {max_attempts: 3, initial_interval: 0s}"
)


def test_an_answer_is_journaled_in_batches(tmp_path: Path) -> None:
    with ScriptedLLM([text(ANSWER, stream=True)]) as llm:
        engine = _engine(tmp_path / "w.db", llm)
        store = engine.store
        assert isinstance(store, SQLiteStore)
        record = engine.start(LLM)
        before = store.commits
        drain(engine)
        commits = store.commits - before
        assert engine.query(record.id).output == ANSWER
        chunks = store.read_stream("default", record.id, 0, 10_000)
        assert [(c.kind, c.activity, c.attempt, c.turn) for c in chunks[:1]] == [
            ("attempt", "ask", 1, 1)
        ]
        assert [c.kind for c in chunks[1:]] == ["text"] * 500
        assert "".join(c.text for c in chunks) == ANSWER
        assert commits < 500 / 4, commits  # batched: never one commit per piece
        engine.close()


def test_a_retried_attempt_opens_with_its_own_marker(tmp_path: Path) -> None:
    with ScriptedLLM([status(500), text("second try", stream=True)]) as llm:
        engine = _engine(tmp_path / "w.db", llm)
        record = engine.start(LLM)
        drain(engine)
        assert engine.query(record.id).output == "second try"
        chunks = engine.store.read_stream("default", record.id)
        assert [(c.kind, c.attempt) for c in chunks if c.kind == "attempt"] == [
            ("attempt", 1),
            ("attempt", 2),
        ]
        assert [c.attempt for c in chunks if c.kind == "text"] == [2] * 3
        assert "".join(c.text for c in chunks) == "second try"
        engine.close()


def test_an_agent_journals_each_turn(tmp_path: Path) -> None:
    registry = ActivityRegistry()
    registry.register("add", lambda a, b: a + b)
    replies = [tool_calls(("add", {"a": 2, "b": 3}), stream=True), text("it is 5", stream=True)]
    with ScriptedLLM(replies, pick="turn") as llm:
        engine = _engine(tmp_path / "w.db", llm, registry)
        step = '    agent: {model: m1, input: "2+3?", tools: [add], stream: true}'
        record = engine.start(_flow(step))
        drain(engine)
        assert engine.query(record.id).output == "it is 5"
        chunks = engine.store.read_stream("default", record.id)
        assert [(c.kind, c.turn) for c in chunks if c.kind == "attempt"] == [
            ("attempt", 1),
            ("attempt", 2),
        ]
        assert {c.turn for c in chunks if c.kind == "text"} == {2}  # turn 1 called a tool
        assert "".join(c.text for c in chunks) == "it is 5"
        assert all(r.body.get("stream") is True for r in llm.completions)
        engine.close()


def test_an_answer_not_streamed_journals_nothing(tmp_path: Path) -> None:
    with ScriptedLLM([text("plain")]) as llm:
        engine = _engine(tmp_path / "w.db", llm)
        record = engine.start(_flow('    llm: {model: m1, prompt: "go"}'))
        drain(engine)
        assert engine.query(record.id).output == "plain"
        assert engine.store.read_stream("default", record.id) == []
        engine.close()


def _claude(db: Path, llm: ScriptedLLM, registry: ActivityRegistry | None = None) -> Engine:
    provider = ProviderConfig("default", llm.base_url, kind="anthropic", api_key=CLAUDE_KEY)
    return Engine(
        SQLiteStore(db),
        clock=ManualClock(datetime(2030, 1, 1, 9, tzinfo=UTC)),
        activities=registry or ActivityRegistry(),
        providers=Providers({"default": provider}),
    )


CLAUDE_KEY = "sk-ant-stream-canary-7d21"


def test_an_anthropic_answer_is_streamed_and_journaled_like_any_other(tmp_path: Path) -> None:
    with ScriptedLLM([text(ANSWER, usage=(30, 500), cached=20)], anthropic_key=CLAUDE_KEY) as llm:
        engine = _claude(tmp_path / "w.db", llm)
        record = engine.start(LLM)
        drain(engine)
        view = engine.query(record.id)
        assert view.status == "completed", view.activities["ask"].get("error")
        assert view.output == ANSWER
        (request,) = llm.requests
        assert request.path.endswith("/messages") and request.body["stream"] is True
        assert "stream_options" not in request.body  # (an OpenAI field)
        chunks = engine.store.read_stream("default", record.id, 0, 10_000)
        assert [c.kind for c in chunks] == ["attempt"] + ["text"] * 500  # a piece a delta
        assert "".join(c.text for c in chunks) == ANSWER
        (done,) = [e for e in engine.history(record.id) if e.type == "ActivityCompleted"]
        (call,) = done.data["model_calls"]
        assert (call["input_tokens"], call["output_tokens"], call["cached_tokens"]) == (30, 500, 20)
        engine.close()


def test_an_anthropic_agent_streams_its_turns_tool_calls_included(tmp_path: Path) -> None:
    registry = ActivityRegistry()
    registry.register("add", lambda a, b: a + b)
    replies = [tool_calls(("add", {"a": 2, "b": 3}, "toolu_1")), text("it is 5")]
    with ScriptedLLM(replies, pick="turn", anthropic_key=CLAUDE_KEY) as llm:
        engine = _claude(tmp_path / "w.db", llm, registry)
        step = '    agent: {model: m1, input: "2+3?", tools: [add], stream: true}'
        record = engine.start(_flow(step))
        drain(engine)
        view = engine.query(record.id)
        assert view.output == "it is 5", view.activities["ask"].get("error")
        (turn,) = [e.data for e in engine.history(record.id) if e.type == "ToolCallCompleted"]
        assert (turn["tool"], turn["arguments"], turn["result"]) == ("add", {"a": 2, "b": 3}, 5)
        chunks = engine.store.read_stream("default", record.id)
        assert {c.turn for c in chunks if c.kind == "text"} == {2}
        assert "".join(c.text for c in chunks) == "it is 5"
        assert all(r.body.get("stream") is True for r in llm.requests)
        engine.close()


CUT = (
    'event: message_start\ndata: {"type": "message_start", "message": {"model": "m1", '
    '"usage": {"input_tokens": 5, "output_tokens": 1}}}\n\n'
    'event: content_block_start\ndata: {"type": "content_block_start", "index": 0, '
    '"content_block": {"type": "text", "text": ""}}\n\n'
    'event: content_block_delta\ndata: {"type": "content_block_delta", "index": 0, '
    '"delta": {"type": "text_delta", "text": "half an ans'
)
OVERLOADED = (
    'event: message_start\ndata: {"type": "message_start", "message": {"model": "m1"}}\n\n'
    'event: error\ndata: {"type": "error", "error": {"type": "overloaded_error", '
    '"message": "Overloaded"}}\n\n'
)


def test_an_anthropic_stream_cut_or_failing_midway_is_a_clear_retried_error(
    tmp_path: Path,
) -> None:
    replies = [
        raw(200, CUT, content_type="text/event-stream"),
        raw(200, OVERLOADED, content_type="text/event-stream"),
        text("whole"),
    ]
    with ScriptedLLM(replies, anthropic_key=CLAUDE_KEY) as llm:
        engine = _claude(tmp_path / "w.db", llm)
        record = engine.start(LLM)
        drain(engine)
        assert engine.query(record.id).output == "whole"
        failed = [e.data for e in engine.history(record.id) if e.type == "ActivityFailed"]
        assert [(f["error"]["type"], f["will_retry"]) for f in failed] == [
            ("ProviderMalformedResponse", True),
            ("ProviderOverloaded", True),
        ]
        assert (
            "ended in the middle of an event before message_stop" in failed[0]["error"]["message"]
        )
        assert len(llm.requests) == 3  # each attempt one call, none repeated
        chunks = engine.store.read_stream("default", record.id)
        assert [c.attempt for c in chunks if c.kind == "attempt"] == [1, 2, 3]
        engine.close()
