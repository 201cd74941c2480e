"""The examples are valid, carry the editor modeline, and say what the issue asks of them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from wovyr.activities.builtin.child import ChildStep
from wovyr.activities.builtin.tool import ToolStep
from wovyr.activities.builtin.wait import WaitStep
from wovyr.definition import load_definition_file, resolve_inputs

from .conftest import EXAMPLES

MODELINE = "# yaml-language-server: $schema=../schema/wovyr-workflow.schema.json\n"


def test_the_expected_examples_exist() -> None:
    names = {p.name for p in EXAMPLES}
    assert {
        "order-saga.yaml",
        "approval-escalation.yaml",
        "fan-out.yaml",
        "parent-child.yaml",
        "order-line.yaml",
        "hello.yaml",
        "llm-with-fallback.yaml",
        "poll-until-done.yaml",
        "monthly-billing.yaml",
    } <= names


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_each_example_loads_and_has_the_modeline(path: Path) -> None:
    assert path.read_text(encoding="utf-8").startswith(MODELINE)
    workflow = load_definition_file(path)
    assert workflow.metadata.description


def _by_name(name: str) -> Path:
    return next(p for p in EXAMPLES if p.name == name)


def test_order_saga_compensates_with_retries_and_timeouts() -> None:
    saga = load_definition_file(_by_name("order-saga.yaml"))

    def tool(step: Any) -> str | None:
        return step.tool if isinstance(step, ToolStep) else None

    tools = {
        a.id: (tool(a.step), tool(a.compensate.step) if a.compensate else None)
        for a in saga.activities
    }
    assert tools["reserve"] == ("inventory.reserve", "inventory.release")
    assert tools["charge"] == ("payments.charge", "payments.refund")
    assert tools["ship"][0] == "shipping.ship"
    assert all(a.retry and a.timeout for a in saga.activities)


def test_approval_escalation_escalates_on_the_managers_timeout_not_a_parallel_timer() -> None:
    """A timer beside the approval kept the run waiting a day after it was approved: the
    approval's own timeout escalates (tests/integration/test_examples_end_to_end.py)."""
    flow = load_definition_file(_by_name("approval-escalation.yaml"))
    waits = {a.id: w.wait for a in flow.activities if (w := a.step_of(WaitStep))}
    assert {aid: w.kind for aid, w in waits.items()} == {
        "manager_approval": "approval",
        "finance_approval": "approval",
    }
    assert all(w.approval and w.approval.timeout == 86400 for w in waits.values())
    finance = flow.activity("finance_approval")
    assert finance.needs == ["manager_approval"] and "ApprovalTimeout" in str(finance.when)


def test_fan_out_fans_out_and_in() -> None:
    flow = load_definition_file(_by_name("fan-out.yaml"))
    needs = {a.id: set(a.needs) for a in flow.activities}
    branches = {aid for aid, n in needs.items() if n == {"plan"}}
    assert len(branches) >= 3
    assert any(n >= branches for n in needs.values())
    assert {"set", "shell"} <= {a.kind for a in flow.activities}


def test_parent_child_starts_the_child_defined_beside_it() -> None:
    parent = load_definition_file(_by_name("parent-child.yaml"))
    child = load_definition_file(_by_name("order-line.yaml"))
    children = [c.workflow for a in parent.activities if (c := a.step_of(ChildStep))]
    assert children and all(c.name == child.name for c in children)
    for spec in children:
        resolve_inputs(child, spec.input)


def test_hello_needs_no_tools() -> None:
    hello = load_definition_file(_by_name("hello.yaml"))
    assert {a.kind for a in hello.activities} <= {"set", "shell"}
    assert resolve_inputs(hello, {}) == {"name": "world"}
    assert hello.output


def test_llm_with_fallback_catches_the_primary_and_routes_on_its_status() -> None:
    flow = load_definition_file(_by_name("llm-with-fallback.yaml"))
    assert flow.activity("primary").continues
    assert not flow.activity("fallback").continues
    assert "activities.primary.status == 'failed'" in str(flow.activity("fallback").when)


def test_poll_until_done_repeats_with_a_durable_timer() -> None:
    flow = load_definition_file(_by_name("poll-until-done.yaml"))
    repeat = flow.activity("poll").repeat
    assert repeat is not None and repeat.every == 2 and repeat.max_iterations == 20
    assert "output.state == 'done'" in repeat.until


def test_monthly_billing_waits_a_month_and_continues_as_new() -> None:
    flow = load_definition_file(_by_name("monthly-billing.yaml"))
    wait = flow.activity("month_passes").step_of(WaitStep)
    assert wait is not None and wait.wait.timer is not None
    assert flow.continue_as_new is not None
    assert "inputs.month < inputs.last_month" in flow.continue_as_new.when
    assert flow.continue_as_new.input == {
        "month": "${{ inputs.month + 1 }}",
        "billed": "${{ output.billed }}",
    }
