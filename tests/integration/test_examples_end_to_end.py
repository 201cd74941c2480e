"""Every workflow under examples/ runs to the end its own comments (and the README) promise,
on every store: approvals and signals given as the comments say, time moved on a
ManualClock where a timer or a back-off is on the way (never slept), and the research agent
answered by the scripted model server (wovyr.testing.model_server).

A new example without a scenario here fails `test_every_example_has_a_scenario`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import fresh_default_registry

from wovyr.activities.base import load_activity_modules
from wovyr.activities.providers import ProviderConfig, Providers
from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine, ExecutionView
from wovyr.store.base import Store
from wovyr.testing import drain
from wovyr.testing.model_server import ScriptedLLM, text, tool_calls

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
T0 = datetime(2030, 1, 1, 9, tzinfo=UTC)
DAY = 86400.0


class Run:
    """The examples' engine on one store, its clock and the scripted model server."""

    def __init__(self, store: Store, llm: ScriptedLLM) -> None:
        self.clock = ManualClock(T0)
        provider = ProviderConfig("default", llm.base_url, default_model="m1")
        self.engine = Engine(store, clock=self.clock, providers=Providers({"default": provider}))
        self.llm = llm

    def start(self, example: str, execution_id: str, **inputs: Any) -> ExecutionView:
        self.engine.start(path=EXAMPLES / example, input=inputs, execution_id=execution_id)
        return self.settle(execution_id)

    def settle(self, execution_id: str) -> ExecutionView:
        """Drive everything runnable now; the execution as it then is."""
        drain(self.engine)
        return self.engine.query(execution_id)

    def later(self, seconds: float, execution_id: str) -> ExecutionView:
        """Move the clock on by `seconds` (due timers fire), then settle."""
        self.clock.advance(seconds)
        return self.settle(execution_id)


@pytest.fixture(scope="module", autouse=True)
def _example_tools() -> Iterator[None]:
    # the examples' handlers register in the default registry: the later tests of this
    # process get it back as it was, and load the files again if they ask
    with fresh_default_registry():
        files = ("activities.py", "research_tools.py")
        load_activity_modules([str(EXAMPLES / name) for name in files])
        yield


@pytest.fixture
def run(store: Store) -> Iterator[Run]:
    script = [
        tool_calls(("search_web", {"query": "durable execution crash"}, "s1")),
        tool_calls(("pages_fetch", {"page_id": "durable-execution"}, "f1")),
        text("It replays its log and resumes at the first unrecorded step [durable-execution]."),
    ]
    with ScriptedLLM(script, pick="turn") as llm:
        yield Run(store, llm)


def _waiting_on(view: ExecutionView) -> set[str]:
    return {aid for aid, act in view.activities.items() if act["status"] == "waiting"}


def hello(run: Run) -> None:
    # wovyr run examples/hello.yaml -i name=Ada
    view = run.start("hello.yaml", "h", name="Ada")
    assert view.status == "completed", view.error
    assert view.output == {"greeting": "Hello, Ada!", "printed": "Hello, Ada!\n"}


def fan_out(run: Run) -> None:
    view = run.start("fan-out.yaml", "f")
    assert view.status == "completed", view.error
    assert view.output == {"total": 31, "largest": 9, "banner": "processing 8 numbers\n"}


def order_line(run: Run) -> None:
    view = run.start("order-line.yaml", "l", sku="A-1", quantity=2, unit_price=2.5)
    assert view.status == "completed", view.error
    assert view.output == {"sku": "A-1", "total": 5.0, "packing_note": "packed 2 x A-1\n"}


def parent_child(run: Run) -> None:
    # "Register both definitions before running this one."
    run.engine.apply(EXAMPLES / "order-line.yaml")
    view = run.start("parent-child.yaml", "p", order_id="O-1")
    assert view.status == "completed", view.error
    assert view.output == {"order_id": "O-1", "total": 43.0, "lines": ["WIDGET-1", "GADGET-7"]}


def order_saga(run: Run) -> None:
    # activities.py: A-1 for 42 ships; a negative amount declines, and the saga compensates
    shipped = run.start("order-saga.yaml", "o1", order_id="A-1", amount=42)
    assert shipped.status == "completed", shipped.error
    assert shipped.output["order_id"] == "A-1" and shipped.output["tracking"].startswith("T-")
    assert [r.id for r in run.engine.list(labels={"order": "A-1"}).items] == ["o1"]  # labels
    declined = run.start("order-saga.yaml", "o2", order_id="A-2", amount=-1)
    assert declined.status == "failed"
    assert declined.error is not None and declined.error["error"]["type"] == "CardDeclined"
    assert declined.activities["reserve"]["status"] == "compensated"
    assert declined.activities["ship"]["status"] == "skipped"


def approval_escalation(run: Run) -> None:
    # a small amount needs no approval
    small = run.start("approval-escalation.yaml", "a0", request_id="R0", amount=50)
    assert small.status == "completed", small.error
    assert small.output == {"request_id": "R0", "approved": True, "escalated": False}
    # the manager approves within the day: that ends the wait, at once
    view = run.start("approval-escalation.yaml", "a1", request_id="R1", amount=5000)
    assert view.status == "waiting" and _waiting_on(view) == {"manager_approval"}
    run.engine.approve("a1", "manager_approval", True, by="managers")
    view = run.settle("a1")
    assert view.status == "completed", view.activities
    assert view.output == {"request_id": "R1", "approved": True, "escalated": False}
    # the manager rejects: the request ends, not approved
    run.start("approval-escalation.yaml", "a2", request_id="R2", amount=5000)
    run.engine.approve("a2", "manager_approval", False, by="managers")
    view = run.settle("a2")
    assert view.status == "completed", view.activities
    assert view.output == {"request_id": "R2", "approved": False, "escalated": False}
    # no decision within a day: escalated to finance, whose approval ends it
    run.start("approval-escalation.yaml", "a3", request_id="R3", amount=5000)
    view = run.later(DAY - 1, "a3")
    assert _waiting_on(view) == {"manager_approval"}
    view = run.later(1, "a3")
    assert view.status == "waiting" and _waiting_on(view) == {"finance_approval"}
    run.engine.approve("a3", "finance_approval", True, by="finance")
    view = run.settle("a3")
    assert view.status == "completed", view.activities
    assert view.output == {"request_id": "R3", "approved": True, "escalated": True}


def llm_with_fallback(run: Run) -> None:
    view = run.start("llm-with-fallback.yaml", "m1", prompt="hi")
    assert view.status == "completed", view.error
    assert view.output == {"answer": "[large] hi", "primary_error": None}
    view = run.start("llm-with-fallback.yaml", "m2", prompt="hi", primary_available=False)
    view = run.later(0.1, "m2")  # the back-offs before attempts 2 and 3
    view = run.later(0.2, "m2")
    assert view.status == "completed", view.error
    assert view.output == {
        "answer": "[small] hi",
        "primary_error": "the primary model is unavailable",
    }
    assert view.activities["primary"]["attempt"] == 3


def poll_until_done(run: Run) -> None:
    view = run.start("poll-until-done.yaml", "j", job="J-1")
    for _ in range(2):  # checks 2 and 3, each after its 2 s timer
        assert view.status == "waiting"
        view = run.later(2, "j")
    assert view.status == "completed", view.error
    assert view.output == "J-1 done after 3 checks"


def monthly_billing(run: Run) -> None:
    view = run.start("monthly-billing.yaml", "sub-1", customer="C-1", last_month=2)
    assert view.status == "waiting"
    view = run.later(30 * DAY, "sub-1")  # month 1 billed; month 2's run waits its month
    assert (view.id, view.status) == ("sub-1~c2", "waiting")
    view = run.later(30 * DAY, "sub-1")
    assert (view.id, view.status) == ("sub-1~c2", "completed")
    assert view.output == {"customer": "C-1", "month": 2, "billed": pytest.approx(19.98)}


def research_agent(run: Run) -> None:
    question = "How does a durable execution engine resume after a crash?"
    view = run.start("research-agent.yaml", "r", question=question)
    assert view.status == "completed", view.error
    assert view.output["answer"].endswith("[durable-execution].")
    assert view.output["turns"] == 3 and len(run.llm.completions) == 3


SCENARIOS: dict[str, Callable[[Run], None]] = {
    "approval-escalation.yaml": approval_escalation,
    "fan-out.yaml": fan_out,
    "hello.yaml": hello,
    "llm-with-fallback.yaml": llm_with_fallback,
    "monthly-billing.yaml": monthly_billing,
    "order-line.yaml": order_line,
    "order-saga.yaml": order_saga,
    "parent-child.yaml": parent_child,
    "poll-until-done.yaml": poll_until_done,
    "research-agent.yaml": research_agent,
}


def test_every_example_has_a_scenario() -> None:
    assert sorted(SCENARIOS) == sorted(p.name for p in EXAMPLES.glob("*.yaml"))


@pytest.mark.parametrize("example", sorted(SCENARIOS))
def test_the_example_reaches_its_documented_end(run: Run, example: str) -> None:
    SCENARIOS[example](run)
