"""Every model call's tokens and cost reach the tenant's daily ledger, wherever its step
runs: an `llm` step mapped over `for_each` items, every iteration of an `llm` or `agent`
step that `repeat`s (not the last alone), and the answers of an `llm` step that never
matched its schema. Against the scripted OpenAI-compatible server (real
HTTP on 127.0.0.1) and a SQLite file; the quota status shows what was used even for a
tenant without a model quota."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from wovyr.activities.base import ActivityRegistry
from wovyr.activities.providers import ProviderConfig, Providers
from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.engine.quotas import Quotas, day_of
from wovyr.store.sqlite import SQLiteStore
from wovyr.testing import drain
from wovyr.testing.model_server import ScriptedLLM, text, tool_calls

T0 = datetime(2030, 1, 1, 9, tzinfo=UTC)
PRICE = (1.0, 2.0)  # per 1M tokens, in and out
USAGE = (40, 10)  # of every answer: 50 tokens
ONE_COST = (40 * 1.0 + 10 * 2.0) / 1e6


def _engine(db: Path, llm: ScriptedLLM) -> Engine:
    registry = ActivityRegistry()

    def add(text: str) -> str:
        """Keep a note."""
        return "noted"

    registry.register("note.add", add)
    provider = ProviderConfig(
        "default", llm.base_url, default_model="m1", price_in=PRICE[0], price_out=PRICE[1]
    )
    return Engine(
        SQLiteStore(db),
        clock=ManualClock(T0),
        activities=registry,
        providers=Providers({"default": provider}),
    )


def _workflow(step: str) -> str:
    return f"""\
apiVersion: wovyr/v1
kind: Workflow
metadata: {{name: spender}}
activities:
  - id: ask
{step}
"""


LLM_MAP = _workflow("""\
    for_each: "${{ [1, 2, 3] }}"
    llm: {prompt: "About ${{ item }}"}""")
LLM_REPEAT = _workflow("""\
    llm: {prompt: "Again, turn ${{ iteration }}"}
    repeat: {until: "${{ iteration >= 3 }}", max_iterations: 5}""")
AGENT_REPEAT = _workflow("""\
    agent: {input: "Note ${{ iteration }}", tools: [note.add]}
    repeat: {until: "${{ iteration >= 3 }}", max_iterations: 5}""")


@pytest.mark.parametrize(
    ("workflow", "calls"),
    [(LLM_MAP, 3), (LLM_REPEAT, 3), (AGENT_REPEAT, 6)],
    ids=["llm-for_each", "llm-repeat", "agent-repeat"],
)
def test_every_model_call_of_a_mapped_or_repeated_step_is_debited(
    tmp_path: Path, workflow: str, calls: int
) -> None:
    # an agent run: one turn that keeps a note, then the answer (2 calls)
    replies = [tool_calls(("note_add", {"text": "x"}, "c1"), usage=USAGE), text("ok", usage=USAGE)]
    pick = "turn" if "agent" in workflow else "order"
    with ScriptedLLM(replies if pick == "turn" else [text("ok", usage=USAGE)], pick=pick) as llm:
        engine = _engine(tmp_path / "w.db", llm)
        engine.set_quotas(Quotas(model_tokens_per_day=100_000, model_cost_per_day=10.0), by="t")
        engine.start(workflow, execution_id="e1")
        drain(engine)
        view = engine.query("e1")
        assert view.status == "completed", view.activities["ask"].get("error")
        assert len(llm.completions) == calls
        used = engine.store.quota_usage("default", day_of(T0))
        assert used["model_tokens"] == calls * 50
        assert used["model_cost"] == pytest.approx(calls * ONE_COST)
        engine.close()


def test_the_quota_status_shows_model_usage_of_a_tenant_without_quotas(tmp_path: Path) -> None:
    with ScriptedLLM([text("ok", usage=USAGE)]) as llm:
        engine = _engine(tmp_path / "w.db", llm)
        engine.start(LLM_MAP, execution_id="e1")
        drain(engine)
        status = engine.quota_usage()
        assert status["quotas"]["model_tokens_per_day"] is None
        assert status["used"]["model_tokens"] == 150
        assert status["used"]["model_cost"] == pytest.approx(3 * ONE_COST)
        engine.close()


def test_the_answers_of_an_llm_step_that_never_matched_its_schema_are_debited(
    tmp_path: Path,
) -> None:
    wf = _workflow("""\
    llm: {prompt: "A title", response_schema: {type: object}, schema_retries: 1}""")
    with ScriptedLLM([text("[1]", usage=USAGE)]) as llm:  # every answer off schema
        engine = _engine(tmp_path / "w.db", llm)
        engine.set_quotas(Quotas(model_tokens_per_day=100_000, model_cost_per_day=10.0), by="t")
        engine.start(wf, execution_id="e1")
        drain(engine)
        assert engine.query("e1").activities["ask"]["error"]["type"] == "SchemaValidationFailed"
        assert len(llm.completions) == 2
        used = engine.store.quota_usage("default", day_of(T0))
        assert used["model_tokens"] == 100
        assert used["model_cost"] == pytest.approx(2 * ONE_COST)
        engine.close()
