"""Agent budgets against the scripted OpenAI-compatible server: a run that exceeds its
budget pauses at that turn (`on_exhausted: approval`) until a person grants more or stops
it; approval waits with a timeout (a tool call counts as denied, a budget pause as
stopped); a tenant's daily model-token and cost quotas in the ledger, debited by the
commits that record model calls, surviving a restart and reset at the next UTC day."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from wovyr.activities.base import ActivityRegistry
from wovyr.activities.providers import ProviderConfig, Providers
from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.engine.quotas import Quotas, day_of
from wovyr.errors import Conflict, InputError, QuotaExceeded
from wovyr.store.sqlite import SQLiteStore
from wovyr.testing import drain
from wovyr.testing.model_server import ScriptedLLM, text, tool_calls

KEY = "sk-canary-budget-5e7a"
T0 = datetime(2030, 1, 1, 9, tzinfo=UTC)


def _workflow(agent: str) -> str:
    return f"""\
apiVersion: wovyr/v1
kind: Workflow
metadata: {{name: spender}}
activities:
  - id: think
    agent:
      model: m1
      input: Work.
      tools: [note.add, mail.send]
{agent}
output: "${{{{ activities.think.output }}}}"
"""


def _registry(effects: list[str]) -> ActivityRegistry:
    registry = ActivityRegistry()

    def add(text: str) -> str:
        """Keep a note."""
        effects.append(f"note:{text}")
        return "noted"

    def send(to: str) -> str:
        """Send a mail."""
        effects.append(f"mail:{to}")
        return f"sent to {to}"

    registry.register("note.add", add)
    registry.register("mail.send", send)
    return registry


def _engine(db: Path, llm: ScriptedLLM, effects: list[str], clock: ManualClock) -> Engine:
    provider = ProviderConfig("default", llm.base_url, price_in=1.0, price_out=2.0, api_key=KEY)
    return Engine(
        SQLiteStore(db),
        clock=clock,
        activities=_registry(effects),
        providers=Providers({"default": provider}),
    )


def _notes(n: int, usage: tuple[int, int] = (40, 10)) -> list[Any]:
    """n turns that each keep a note (50 tokens each), then an answer."""
    turns = [tool_calls(("note_add", {"text": f"t{i}"}, f"c{i}"), usage=usage) for i in range(n)]
    return [*turns, text("done", usage=usage)]


def test_a_run_past_its_budget_pauses_until_a_person_grants_more_then_stops(
    tmp_path: Path,
) -> None:
    effects: list[str] = []
    budget = "      budget: {tokens: 120, on_exhausted: approval}"
    with ScriptedLLM(_notes(6), pick="turn") as llm:
        engine = _engine(tmp_path / "w.db", llm, effects, ManualClock(T0))
        engine.start(_workflow(budget), execution_id="e1")
        drain(engine)
        view = engine.query("e1")
        think = view.activities["think"]
        assert (view.status, think["status"]) == ("waiting", "waiting")
        wait = think["wait"]
        assert (wait["reason"], wait["turn"]) == ("budget", 3)  # 50, 100, 150 > 120
        assert wait["usage"] == {"input_tokens": 120, "output_tokens": 30}
        assert wait["budget"] == {"tokens": 120, "cost": None}
        assert effects == ["note:t0", "note:t1"]  # turn 3's tool call waits too
        assert len(llm.completions) == 3

        with pytest.raises(InputError):
            engine.approve("e1", "think", True, by="ada", grant={"tokens": 0})

        engine.approve("e1", "think", True, by="ada", grant={"tokens": 100})
        drain(engine)
        wait = engine.query("e1").activities["think"]["wait"]
        assert (wait["reason"], wait["turn"]) == ("budget", 5)  # 250 > 220
        assert wait["budget"]["tokens"] == 220
        assert effects == ["note:t0", "note:t1", "note:t2", "note:t3"]

        engine.approve("e1", "think", False, by="bob", comment="enough")
        drain(engine)
        view = engine.query("e1")
        assert view.status == "failed"
        error = view.activities["think"]["error"]
        assert error["type"] == "BudgetExceeded"
        assert "at turn 5" in error["message"] and "bob stopped the run: enough" in error["message"]
        assert len(llm.completions) == 5  # no model call was made twice
        assert effects == ["note:t0", "note:t1", "note:t2", "note:t3"]
        kinds = [e.type for e in engine.history("e1")]
        assert kinds.count("ActivitySuspended") == 2
        decided = [e for e in engine.history("e1") if e.type == "ApprovalDecided"]
        assert decided[0].data["grant"] == {"tokens": 100}
        engine.close()


def test_an_approval_without_a_grant_extends_the_budget_by_its_first_size(
    tmp_path: Path,
) -> None:
    effects: list[str] = []
    budget = "      budget: {tokens: 120, on_exhausted: approval}"
    with ScriptedLLM(_notes(3), pick="turn") as llm:
        engine = _engine(tmp_path / "w.db", llm, effects, ManualClock(T0))
        engine.start(_workflow(budget), execution_id="e1")
        drain(engine)
        engine.approve("e1", "think", True, by="ada")  # 120 more: 240 >= 200 in all
        drain(engine)
        view = engine.query("e1")
        assert view.status == "completed", view.activities["think"]
        assert view.output["turns"] == 4 and view.output["text"] == "done"
        assert len(llm.completions) == 4
        engine.close()


def test_a_tool_approval_that_times_out_is_denied_and_the_model_is_told(
    tmp_path: Path,
) -> None:
    effects: list[str] = []
    clock = ManualClock(T0)
    agent = "      require_approval: [mail.send]\n      approval_timeout: 1h"
    script = [tool_calls(("mail_send", {"to": "a@x"}, "c1")), text("could not mail")]
    with ScriptedLLM(script, pick="turn") as llm:
        engine = _engine(tmp_path / "w.db", llm, effects, clock)
        engine.start(_workflow(agent), execution_id="e1")
        drain(engine)
        wait = engine.query("e1").activities["think"]["wait"]
        assert wait["tool"] == "mail.send"
        assert wait["timeout_at"] == (T0 + timedelta(hours=1)).isoformat()
        with pytest.raises(Conflict):  # a grant decides only a budget pause
            engine.approve("e1", "think", True, by="ada", grant={"tokens": 5})
        clock.advance(minutes=59)
        drain(engine)
        assert engine.query("e1").status == "waiting"  # not yet
        clock.advance(minutes=2)
        drain(engine)
        view = engine.query("e1")
        assert view.status == "completed", view.activities["think"]
        assert effects == []  # the call was never made
        told = [m for m in llm.completions[1].body["messages"] if m["role"] == "tool"]
        assert told[0]["content"].startswith("error: ApprovalTimeout: no one approved")
        resumed = [e for e in engine.history("e1") if e.type == "ActivityResumed"]
        assert resumed[0].data["decision"]["timed_out"] is True
        assert view.output["tool_calls"][0]["error"]["type"] == "ApprovalTimeout"
        with pytest.raises(Conflict):  # too late to decide
            engine.approve("e1", "think", True, by="ada")
        engine.close()


def test_a_decision_before_the_timeout_cancels_its_timer(tmp_path: Path) -> None:
    effects: list[str] = []
    clock = ManualClock(T0)
    agent = "      require_approval: [mail.send]\n      approval_timeout: 1h"
    script = [tool_calls(("mail_send", {"to": "a@x"}, "c1")), text("mailed")]
    with ScriptedLLM(script, pick="turn") as llm:
        engine = _engine(tmp_path / "w.db", llm, effects, clock)
        engine.start(_workflow(agent), execution_id="e1")
        drain(engine)
        engine.approve("e1", "think", True, by="ada")
        drain(engine)
        assert engine.query("e1").status == "completed"
        assert effects == ["mail:a@x"]
        types = [e.type for e in engine.history("e1")]
        assert "TimerCancelled" in types and "TimerFired" not in types
        engine.close()


def test_a_budget_pause_that_times_out_stops_the_run(tmp_path: Path) -> None:
    effects: list[str] = []
    clock = ManualClock(T0)
    agent = "      budget: {tokens: 60, on_exhausted: approval}\n      approval_timeout: 10m"
    with ScriptedLLM(_notes(3), pick="turn") as llm:
        engine = _engine(tmp_path / "w.db", llm, effects, clock)
        engine.start(_workflow(agent), execution_id="e1")
        drain(engine)
        assert engine.query("e1").activities["think"]["wait"]["reason"] == "budget"
        clock.advance(minutes=11)
        drain(engine)
        view = engine.query("e1")
        assert view.status == "failed"
        error = view.activities["think"]["error"]
        assert error["type"] == "BudgetExceeded"
        assert "before the approval timeout" in error["message"]
        assert len(llm.completions) == 2
        engine.close()


def test_a_tenants_daily_token_quota_survives_a_restart_and_resets_at_midnight(
    tmp_path: Path,
) -> None:
    effects: list[str] = []
    clock = ManualClock(T0)
    db = tmp_path / "w.db"
    with ScriptedLLM(_notes(2), pick="turn") as llm:
        engine = _engine(db, llm, effects, clock)
        engine.set_quotas(Quotas(model_tokens_per_day=120, model_cost_per_day=5.0), by="test")
        engine.start(_workflow(""), execution_id="e1")
        drain(engine)
        assert engine.query("e1").status == "completed"  # work done is never refused
        used = engine.store.quota_usage("default", day_of(T0))
        assert used["model_tokens"] == 150  # 3 calls of 50, debited as recorded
        assert used["model_cost"] == pytest.approx(3 * (40 + 20) / 1e6)
        engine.close()

        again = _engine(db, llm, effects, clock)  # a restart, the same day
        with pytest.raises(QuotaExceeded) as refused:
            again.start(_workflow(""), execution_id="e2")
        assert refused.value.retry_after == pytest.approx(15 * 3600)
        clock.advance(hours=15)  # the next UTC day
        again.start(_workflow(""), execution_id="e2")
        drain(again)
        assert again.query("e2").status == "completed"
        again.close()


def test_a_run_started_before_the_quota_ran_out_makes_no_further_model_call(
    tmp_path: Path,
) -> None:
    effects: list[str] = []
    clock = ManualClock(T0)
    with ScriptedLLM(_notes(4), pick="turn") as llm:
        engine = _engine(tmp_path / "w.db", llm, effects, clock)
        engine.set_quotas(Quotas(model_cost_per_day=100 / 1e6), by="test")  # < 2 calls
        engine.start(_workflow(""), execution_id="e1")
        drain(engine)
        view = engine.query("e1")
        assert view.status == "failed"
        error = view.activities["think"]["error"]
        assert error["type"] == "QuotaExceeded"
        assert "model cost for tenant default used up today" in error["message"]
        assert len(llm.completions) == 2  # 60, 120 (> 100): the third is never asked
        assert effects == ["note:t0", "note:t1"]
        engine.close()
