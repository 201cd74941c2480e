"""The `agent` kind end to end against a scripted OpenAI-compatible server: a 3-turn loop
with parallel tool calls (run concurrently), a failing tool, a tool not allowed and bad
arguments fed back to the model; each model call and tool call recorded as its own event;
a 429 mid-loop resumed on the next attempt without repeating a completed call; max_turns
and budgets as clear recorded failures; tool schemas derived from signatures."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from wovyr.activities.base import ActivityContext, ActivityRegistry
from wovyr.activities.providers import ProviderConfig, Providers
from wovyr.activities.tool_schema import InvalidToolArguments, function_name, tool_signature
from wovyr.clock import ManualClock
from wovyr.definition import load_definition
from wovyr.engine.engine import Engine
from wovyr.errors import DefinitionError
from wovyr.store.sqlite import SQLiteStore
from wovyr.testing import drain
from wovyr.testing.model_server import ScriptedLLM, status, text, tool_calls

KEY = "sk-canary-agent-91d2"
T0 = datetime(2030, 1, 1, 9, tzinfo=UTC)


def _workflow(extra: str = "", tools: str = "[math.add, geo.lookup, explode]") -> str:
    return f"""\
apiVersion: wovyr/v1
kind: Workflow
metadata: {{name: helper}}
activities:
  - id: think
    agent:
      model: m1
      instructions: Use the tools.
      input: What is 2 + 3, and where is Paris?
      tools: {tools}
{extra}
output: "${{{{ activities.think.output }}}}"
"""


class Effects:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        self.barrier = threading.Barrier(2, timeout=10)

    def note(self, tool: str, ctx: ActivityContext) -> None:
        with self.lock:
            self.calls.append((tool, ctx.idempotency_key))


def _registry(effects: Effects) -> ActivityRegistry:
    registry = ActivityRegistry()

    def add(a: int, b: int, ctx: ActivityContext) -> int:
        """Add two whole numbers."""
        effects.note("math.add", ctx)
        effects.barrier.wait()  # only passes when lookup runs at the same time
        return a + b

    def lookup(city: str, ctx: ActivityContext, country: str = "FR") -> dict[str, Any]:
        """Where a city is."""
        effects.note("geo.lookup", ctx)
        effects.barrier.wait()
        return {"city": city, "country": country}

    def explode(ctx: ActivityContext) -> None:
        effects.note("explode", ctx)
        raise RuntimeError("the tool broke")

    registry.register("math.add", add)
    registry.register("geo.lookup", lookup)
    registry.register("explode", explode)
    return registry


def _engine(db: Path, llm: ScriptedLLM, registry: ActivityRegistry, **kw: Any) -> Engine:
    provider = ProviderConfig("default", llm.base_url, price_in=1.0, price_out=2.0, api_key=KEY)
    return Engine(
        SQLiteStore(db),
        clock=kw.pop("clock", None) or ManualClock(T0),
        activities=registry,
        providers=Providers({"default": provider}),
    )


THREE_TURNS = [
    tool_calls(("math_add", {"a": 2, "b": 3}), ("geo_lookup", {"city": "Paris"})),
    tool_calls(
        ("explode", {}),
        ("web_search", {"q": "x"}),
        ("math_add", {}),
        raw_arguments={2: '{"a": "two", "b": 3'},
    ),
    text("2 + 3 = 5; Paris is in FR."),
]


def test_a_three_turn_loop_with_parallel_calls_and_errors_fed_back(tmp_path: Path) -> None:
    effects = Effects()
    with ScriptedLLM(THREE_TURNS, pick="turn") as llm:
        engine = _engine(tmp_path / "w.db", llm, _registry(effects))
        engine.start(_workflow(), execution_id="e1")
        drain(engine)
        view = engine.query("e1")
        assert view.status == "completed", view.activities["think"]
        out = view.output
        assert out["text"] == "2 + 3 = 5; Paris is in FR."
        assert out["turns"] == 3
        assert out["usage"] == {"input_tokens": 30, "output_tokens": 15}
        assert out["cost"] == pytest.approx((30 * 1.0 + 15 * 2.0) / 1e6)
        calls = {(c["turn"], c["call_id"]): c for c in out["tool_calls"]}
        assert calls[(1, "call_0")]["result"] == 5  # the barrier passed: run concurrently
        assert calls[(1, "call_1")]["result"] == {"city": "Paris", "country": "FR"}
        assert calls[(2, "call_0")]["error"] == {
            "type": "RuntimeError",
            "message": "the tool broke",
        }
        assert calls[(2, "call_1")]["error"]["type"] == "ToolNotAllowed"
        assert calls[(2, "call_2")]["error"]["type"] == "InvalidArguments"
        # what the model was sent back in turn 3
        third = llm.completions[2].body["messages"]
        sent = {m["tool_call_id"]: m["content"] for m in third if m["role"] == "tool"}
        assert sent["call_0"] == "error: RuntimeError: the tool broke"
        assert "there is no tool 'web_search'" in sent["call_1"]
        assert "not valid JSON" in sent["call_2"]
        # the first request offered the tools with schemas from their signatures
        offered = {t["function"]["name"]: t["function"] for t in llm.completions[0].body["tools"]}
        assert set(offered) == {"math_add", "geo_lookup", "explode"}
        assert offered["math_add"]["description"] == "Add two whole numbers."
        params = offered["geo_lookup"]["parameters"]
        assert params["required"] == ["city"]
        assert params["properties"]["country"]["default"] == "FR"
        # every model call and tool call is its own event, in order
        kinds = [e.type for e in engine.history("e1")]
        steps = [k for k in kinds if k in ("ModelCallCompleted", "ToolCallCompleted")]
        assert steps == ["ModelCallCompleted"] + ["ToolCallCompleted"] * 2 + [
            "ModelCallCompleted"
        ] + ["ToolCallCompleted"] * 3 + ["ModelCallCompleted"]
        assert kinds.index("ActivityCompleted") > kinds.index("ModelCallCompleted")
        assert sorted(t for t, _ in effects.calls) == ["explode", "geo.lookup", "math.add"]
        keys = {k for _, k in effects.calls}
        assert "e1/think/t1/call_0" in keys
        assert all(r.authorization == f"Bearer {KEY}" for r in llm.completions)
        engine.close()
    for path in tmp_path.iterdir():
        assert KEY.encode() not in path.read_bytes()


def test_a_429_mid_loop_resumes_without_repeating_completed_calls(tmp_path: Path) -> None:
    effects = Effects()
    clock = ManualClock(T0)
    replies = [THREE_TURNS[0], status(429, retry_after="5"), THREE_TURNS[2]]
    with ScriptedLLM(replies[:2], pick="turn") as llm:  # turn 2 is refused (429)
        engine = _engine(tmp_path / "w.db", llm, _registry(effects), clock=clock)
        engine.start(_workflow(), execution_id="e1")
        drain(engine)
        view = engine.query("e1")
        think = view.activities["think"]
        assert (think["status"], think["error"]["type"]) == ("retrying", "ProviderRateLimited")
        assert len(llm.completions) == 2
    with ScriptedLLM([replies[0], replies[2]], pick="turn", port=llm.port) as again:
        clock.advance(5)
        drain(engine)
        view = engine.query("e1")
        assert view.status == "completed"
        assert view.output["turns"] == 2
        assert len(again.completions) == 1  # turn 1 came from the log, not the model
        assert again.completions[0].turn == 1
        # the tools of turn 1 ran once, on the first attempt
        assert sorted(t for t, _ in effects.calls) == ["geo.lookup", "math.add"]
        history = engine.history("e1")
        models = [e for e in history if e.type == "ModelCallCompleted"]
        assert [(e.data["turn"], e.data["attempt"]) for e in models] == [(1, 1), (2, 2)]
        engine.close()


def test_max_turns_is_a_clear_recorded_failure(tmp_path: Path) -> None:
    effects = Effects()
    loop = [tool_calls(("explode", {}))]  # always asks for a tool
    with ScriptedLLM(loop, pick="turn") as llm:
        engine = _engine(tmp_path / "w.db", llm, _registry(effects))
        engine.start(_workflow("      max_turns: 3"), execution_id="e1")
        drain(engine)
        view = engine.query("e1")
        assert view.status == "failed"
        error = view.activities["think"]["error"]
        assert error["type"] == "MaxTurnsExceeded"
        assert "max_turns (3)" in error["message"]
        assert error["details"]["turns"] == 3
        assert len(llm.completions) == 3  # not retried
        engine.close()


def test_a_token_budget_stops_the_loop_at_the_turn_that_exceeded_it(tmp_path: Path) -> None:
    effects = Effects()
    loop = [tool_calls(("explode", {}), usage=(40, 10))]
    with ScriptedLLM(loop, pick="turn") as llm:
        engine = _engine(tmp_path / "w.db", llm, _registry(effects))
        engine.start(_workflow("      budget: {tokens: 120}"), execution_id="e1")
        drain(engine)
        view = engine.query("e1")
        assert view.status == "failed"
        error = view.activities["think"]["error"]
        assert error["type"] == "BudgetExceeded"
        assert "at turn 3" in error["message"]  # 50, 100, 150 > 120
        assert error["details"]["usage"] == {"input_tokens": 120, "output_tokens": 30}
        assert len(llm.completions) == 3
        assert [t for t, _ in effects.calls] == ["explode", "explode"]  # turn 3's not run
        engine.close()


def test_a_cost_budget_stops_the_loop(tmp_path: Path) -> None:
    effects = Effects()
    loop = [tool_calls(("explode", {}), usage=(1_000_000, 0))]  # $1 a turn at $1/1M
    with ScriptedLLM(loop, pick="turn") as llm:
        engine = _engine(tmp_path / "w.db", llm, _registry(effects))
        engine.start(_workflow("      budget: {cost: 1.5}"), execution_id="e1")
        drain(engine)
        error = engine.query("e1").activities["think"]["error"]
        assert error["type"] == "BudgetExceeded"
        assert "at turn 2" in error["message"]
        engine.close()


def test_an_unregistered_tool_is_caught_before_a_run(tmp_path: Path) -> None:
    from wovyr.activities.kinds import KINDS

    workflow = load_definition(_workflow(tools="[math.add, math.ad]"))
    registry = _registry(Effects())
    act = workflow.activities[0]
    preflight = KINDS.get("agent").preflight
    assert preflight is not None
    (problem,) = preflight(act.step, registry)
    assert problem.path == ("agent", "tools", "1")
    assert "'math.ad'" in problem.message
    assert problem.hint is not None and "did you mean 'math.add'" in problem.hint


def test_bad_agent_definitions_are_located_errors() -> None:
    with pytest.raises(DefinitionError) as caught:
        load_definition(_workflow("      max_turns: 0"))
    assert "max_turns" in str(caught.value)
    with pytest.raises(DefinitionError) as caught:
        load_definition(_workflow(tools="[bad name!]"))
    assert "tools" in str(caught.value)


class Point(BaseModel):
    x: int
    y: int


def test_tool_schemas_come_from_signatures_and_check_arguments() -> None:
    def place(where: Point, label: str = "", *, ctx: ActivityContext) -> str:
        """Put a label at a point."""
        return f"{label}@{where.x},{where.y}"

    signature = tool_signature("maps.place", place)
    schema = signature.function("maps_place")["function"]["parameters"]
    assert schema["required"] == ["where"]
    assert "ctx" not in schema["properties"]
    args = signature.arguments('{"where": {"x": 1, "y": 2}, "label": "A"}')
    assert args == {"where": Point(x=1, y=2), "label": "A"}
    with pytest.raises(InvalidToolArguments, match="where"):
        signature.arguments('{"label": "A"}')
    with pytest.raises(InvalidToolArguments, match="Extra inputs"):
        signature.arguments('{"where": {"x": 1, "y": 2}, "nope": 1}')
    assert function_name("maps.place", set()) == "maps_place"
    assert function_name("maps.place", {"maps_place"}) == "maps_place_2"
    assert json.dumps(schema)  # plain JSON


APPROVAL = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: mailer}
activities:
  - id: think
    agent:
      model: m1
      input: Mail a and b.
      tools: [mail.send, geo.where]
      require_approval: [mail.send]
output: "${{ activities.think.output }}"
"""


def test_require_approval_waits_for_a_person_and_a_denial_reaches_the_model(
    tmp_path: Path,
) -> None:
    sent: list[str] = []
    looked: list[str] = []
    registry = ActivityRegistry()

    def send(to: str) -> str:
        """Send a mail."""
        sent.append(to)
        return f"sent to {to}"

    def where(city: str) -> str:
        looked.append(city)
        return "FR"

    registry.register("mail.send", send)
    registry.register("geo.where", where)
    script = [
        tool_calls(("mail_send", {"to": "a@x"}, "c1"), ("geo_where", {"city": "Paris"}, "c2")),
        tool_calls(("mail_send", {"to": "b@x"}, "c3")),
        text("mailed a; b was refused"),
    ]
    with ScriptedLLM(script, pick="turn") as llm:
        engine = _engine(tmp_path / "w.db", llm, registry)
        engine.start(APPROVAL, execution_id="e1")
        drain(engine)
        view = engine.query("e1")
        think = view.activities["think"]
        assert (view.status, think["status"]) == ("waiting", "waiting")
        assert think["wait"]["kind"] == "approval"
        assert (think["wait"]["tool"], think["wait"]["call_id"]) == ("mail.send", "c1")
        assert json.loads(think["wait"]["arguments"]) == {"to": "a@x"}
        assert (sent, looked) == ([], ["Paris"])  # the call that needs no approval ran
        drain(engine)  # nothing happens without a decision
        assert engine.query("e1").status == "waiting" and len(llm.completions) == 1

        engine.approve("e1", "think", True, by="ada")
        drain(engine)
        think = engine.query("e1").activities["think"]
        assert (think["wait"]["tool"], think["wait"]["call_id"]) == ("mail.send", "c3")
        assert sent == ["a@x"]

        engine.approve("e1", "think", False, by="bob", comment="not to b")
        drain(engine)
        view = engine.query("e1")
        assert view.status == "completed"
        assert view.output["text"] == "mailed a; b was refused"
        assert (sent, looked) == (["a@x"], ["Paris"])  # nothing ran twice
        assert len(llm.completions) == 3  # no model call was made again
        last = llm.completions[2].body["messages"]
        told = {m["tool_call_id"]: m["content"] for m in last if m["role"] == "tool"}
        assert told == {
            "c1": "sent to a@x",
            "c2": "FR",
            "c3": "error: ApprovalDenied: bob denied this call: not to b",
        }
        kinds = [e.type for e in engine.history("e1")]
        assert kinds.count("ActivitySuspended") == 2
        assert kinds.count("ActivityResumed") == 2
        assert kinds.count("ApprovalDecided") == 2
        engine.close()
