"""Registered workflows as an agent's tools (`tools: [workflow:NAME]`) against the scripted
model server: the workflow's inputs are the tool's JSON Schema; a call starts a durable
child execution whose output is the call's result (the agent's activity waits holding no
worker, and runs again when the child ends); arguments that do not fit are told to the
model; a failed child is an error the model sees; the child's id is derived from the call,
so a restart finds the same child and its side effect happens once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from wovyr.activities.base import ActivityRegistry
from wovyr.activities.providers import ProviderConfig, Providers
from wovyr.clock import ManualClock
from wovyr.engine.core.state import state_from_json
from wovyr.engine.engine import Engine
from wovyr.store.sqlite import SQLiteStore
from wovyr.testing import drain
from wovyr.testing.model_server import ScriptedLLM, text, tool_calls

T0 = datetime(2030, 1, 1, 9, tzinfo=UTC)

REFUND = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: refund-order, description: Refund an order to its buyer.}
inputs:
  order_id: {type: string, required: true, description: The order}
  amount: {type: number, default: 0}
activities:
  - id: pay
    tool: refund.pay
    with: {order_id: "${{ inputs.order_id }}", amount: "${{ inputs.amount }}"}
    retry: {max_attempts: 1}
output: "${{ activities.pay.output }}"
"""

AGENT = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: support}
activities:
  - id: think
    agent:
      model: m1
      input: Refund order 7.
      tools: [{workflow: refund-order}, note.add]
output: "${{ activities.think.output }}"
"""


def _registry(paid: list[tuple[str, float]], notes: list[str]) -> ActivityRegistry:
    registry = ActivityRegistry()

    def pay(order_id: str, amount: float) -> dict[str, Any]:
        if order_id == "bad":
            raise RuntimeError("no such order")
        paid.append((order_id, amount))
        return {"refunded": order_id, "amount": amount}

    def add(text: str) -> str:
        """Keep a note."""
        notes.append(text)
        return "noted"

    registry.register("refund.pay", pay)
    registry.register("note.add", add)
    return registry


def _engine(db: Path, llm: ScriptedLLM, registry: ActivityRegistry) -> Engine:
    provider = ProviderConfig("default", llm.base_url, api_key="sk-canary-wft-33")
    return Engine(
        SQLiteStore(db),
        clock=ManualClock(T0),
        activities=registry,
        providers=Providers({"default": provider}),
    )


def test_a_workflow_tool_runs_as_a_child_and_its_output_is_the_result(tmp_path: Path) -> None:
    paid: list[tuple[str, float]] = []
    notes: list[str] = []
    script = [
        tool_calls(
            ("workflow_refund-order", {"order_id": "7", "amount": 12.5}, "c1"),
            ("note_add", {"text": "refunding 7"}, "c2"),
        ),
        tool_calls(
            ("workflow_refund-order", {"amount": 1}, "c3"),  # no order_id
            ("workflow_refund-order", {"order_id": "bad"}, "c4"),  # the child fails
        ),
        text("refunded 7"),
    ]
    with ScriptedLLM(script, pick="turn") as llm:
        engine = _engine(tmp_path / "w.db", llm, _registry(paid, notes))
        engine.apply(REFUND)
        engine.start(AGENT, execution_id="e1")
        drain(engine)
        view = engine.query("e1")
        assert view.status == "completed", view.activities["think"]
        assert view.output["text"] == "refunded 7"
        assert (paid, notes) == ([("7", 12.5)], ["refunding 7"])
        # the tool offered: the workflow's inputs as its JSON Schema
        offered = {t["function"]["name"]: t["function"] for t in llm.completions[0].body["tools"]}
        refund = offered["workflow_refund-order"]
        assert refund["description"] == "Refund an order to its buyer."
        assert refund["parameters"] == {
            "type": "object",
            "properties": {
                "order_id": {"type": "string", "description": "The order"},
                "amount": {"type": "number", "default": 0},
            },
            "required": ["order_id"],
            "additionalProperties": False,
        }
        calls = {c["call_id"]: c for c in view.output["tool_calls"]}
        assert calls["c1"]["result"] == {"refunded": "7", "amount": 12.5}
        child = calls["c1"]["child"]
        assert engine.query(child).status == "completed"
        assert engine.get(child).parent_id == "e1"
        assert calls["c3"]["error"]["type"] == "InvalidArguments"
        assert "order_id" in calls["c3"]["error"]["message"]
        assert calls["c4"]["error"]["message"].startswith("the workflow ended failed")
        told = {
            m["tool_call_id"]: m["content"]
            for m in llm.completions[2].body["messages"]
            if m["role"] == "tool"
        }
        assert json.loads(told["c1"]) == {"refunded": "7", "amount": 12.5}
        assert "no such order" in told["c4"]
        assert len(llm.completions) == 3  # no model call repeated across the waits
        finished = [e for e in engine.history("e1") if e.type == "ChildFinished"]
        assert {e.data["call"]["call_id"] for e in finished} == {"c1", "c4"}
        engine.close()


def test_the_child_of_a_call_is_found_again_after_a_restart(tmp_path: Path) -> None:
    paid: list[tuple[str, float]] = []
    script = [tool_calls(("workflow_refund-order", {"order_id": "7"}, "c1")), text("done")]
    db = tmp_path / "w.db"
    with ScriptedLLM(script, pick="turn") as llm:
        engine = _engine(db, llm, _registry(paid, []))
        engine.apply(REFUND)
        engine.start(AGENT, execution_id="e1")
        drain(engine, only=["e1"])  # the parent only: its child is started, not run
        think = engine.query("e1").activities["think"]
        assert (think["status"], think["wait"]["kind"]) == ("waiting", "children")
        child = think["wait"]["children"]["c1"]
        state = engine.query("e1")
        assert "tool workflows" in (state.waiting_on or "")
        # the same call started again (a lost attempt run again) finds the same child
        record = engine.store.load("e1", "default")
        assert record is not None
        parent = state_from_json(record.checkpoint or {})
        call = {"turn": 1, "call_id": "c1", "tool": "workflow:refund-order", "arguments": {}}
        again = engine.start_tool_child(parent, "think", "refund-order", {"order_id": "7"}, call)
        assert again == child
        engine.close()

        restarted = _engine(db, llm, _registry(paid, []))
        drain(restarted)
        view = restarted.query("e1")
        assert view.status == "completed", view.activities["think"]
        assert paid == [("7", 0.0)]  # once
        assert [c.id for c in restarted.list(parent_id="e1").items] == [child]
        assert len(llm.completions) == 2
        restarted.close()


@pytest.mark.slow  # two CLI processes
def test_a_foreground_run_drives_the_children_of_its_workflow_tools(tmp_path: Path) -> None:
    (tmp_path / "refund.yaml").write_text(REFUND)
    (tmp_path / "support.yaml").write_text(AGENT)
    (tmp_path / "refund_tools.py").write_text(
        "import wovyr\n\n\n"
        '@wovyr.activity("refund.pay")\n'
        "def pay(order_id: str, amount: float) -> dict:\n"
        '    return {"refunded": order_id}\n\n\n'
        '@wovyr.activity("note.add")\n'
        "def add(text: str) -> str:\n"
        '    return "noted"\n'
    )
    root = Path(__file__).resolve().parents[2]
    script = [tool_calls(("workflow_refund-order", {"order_id": "9"}, "c1")), text("refunded 9")]
    with ScriptedLLM(script, pick="turn") as llm:
        env = {
            **os.environ,
            "PYTHONPATH": str(root / "src"),
            "WOVYR_HOME": str(tmp_path / "home"),
            "WOVYR_LLM_BASE_URL": llm.base_url,
            "WOVYR_LLM_MODEL": "m1",
        }
        for name in ("WOVYR_DATABASE_URL", "WOVYR_TENANT"):
            env.pop(name, None)

        def wovyr(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, "-m", "wovyr", *args],
                env=env,
                cwd=tmp_path,
                check=False,
                capture_output=True,
                text=True,
                timeout=120,
            )

        applied = wovyr("definitions", "apply", str(tmp_path / "refund.yaml"))
        assert applied.returncode == 0, applied.stdout + applied.stderr
        ran = wovyr("run", "support.yaml", "-a", "refund_tools.py", "--json")
        assert ran.returncode == 0, ran.stdout + ran.stderr
        output = json.loads(ran.stdout)["output"]
        assert output["text"] == "refunded 9"
        assert output["tool_calls"][0]["result"] == {"refunded": "9"}


def test_an_agent_naming_a_workflow_not_registered_is_refused_at_apply(tmp_path: Path) -> None:
    from wovyr.engine.agents import apply_agent
    from wovyr.errors import DefinitionError

    document = """\
apiVersion: wovyr/v1
kind: Agent
metadata: {name: support, version: "1"}
spec:
  model: m1
  tools: [{workflow: refund-order}, "workflow:refund-ordr"]
  approval_timeout: 1h
"""
    with ScriptedLLM([text("x")]) as llm:
        engine = _engine(tmp_path / "w.db", llm, ActivityRegistry())
        engine.apply(REFUND)
        with pytest.raises(DefinitionError) as refused:
            apply_agent(engine, document, filename="support.yaml")
        [problem] = refused.value.problems
        assert (problem.line, problem.path) == (6, "spec.tools[1]")
        assert "no workflow 'refund-ordr' is registered" in problem.message
        outcome, _, agent = apply_agent(
            engine, document.replace("refund-ordr", "refund-order"), filename="support.yaml"
        )
        assert outcome == "applied"
        assert agent.spec.tools == ["workflow:refund-order", "workflow:refund-order"]
        assert agent.spec.approval_timeout == 3600
        engine.close()
