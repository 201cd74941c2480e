"""Streamed model answers are journaled beside the events (real SQLite, a real scripted
model server): an `llm` answer's pieces, in batches (far fewer commits than pieces), opened
by an attempt marker; an `agent` journals each turn as its own generation; a retried
attempt opens with its own marker; an answer not streamed journals nothing."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from wovyr.activities.base import ActivityRegistry
from wovyr.activities.providers import ProviderConfig, Providers
from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.store.sqlite import SQLiteStore
from wovyr.testing import drain
from wovyr.testing.model_server import ScriptedLLM, status, text, tool_calls

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
