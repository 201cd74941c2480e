"""Each attempt keeps its log lines (`ctx.log` and its handler module's `logging` during the
attempt, not other modules'), capped, with secret values masked; a failed attempt keeps its
traceback; `Engine.logs` reads them back per attempt, on every store. The JSON log lines of
the worker carry the execution, activity and attempt ids."""

from __future__ import annotations

import io
import json
import logging
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from tests.integration import logging_tools

from wovyr.activities.base import ActivityRegistry
from wovyr.activities.logs import MAX_LINES, JsonLines, route_output
from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.store.base import Store
from wovyr.testing import drain

FLOW = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: billing}
activities:
  - id: charge
    tool: charge
    with: {amount: 12, token: "${{ secrets.CARD_TOKEN }}"}
    retry: {max_attempts: 2, initial_interval: 0}
  - {id: talk, needs: [charge], tool: chatty, with: {n: %d}}
"""
SECRET = "tok-4242-very-secret"


class Secrets:
    def resolve_secret(self, tenant: str, name: str) -> str:
        assert name == "CARD_TOKEN"
        return SECRET


@pytest.fixture
def logged(store: Store, clock: ManualClock, registry: ActivityRegistry) -> Iterator[Engine]:
    registry.register("charge", logging_tools.charge)
    registry.register("chatty", logging_tools.chatty)
    module = logging.getLogger(logging_tools.__name__)
    level = module.level
    module.setLevel(logging.INFO)  # kept at the level logging lets through
    try:
        yield Engine(store, clock=clock, activities=registry, secrets=Secrets())
    finally:
        module.setLevel(level)


def test_each_attempt_keeps_its_lines_and_traceback_with_secrets_masked(logged: Engine) -> None:
    logged.start(FLOW % 3, execution_id="bill")
    drain(logged)
    assert logged.query("bill").status == "completed"
    items, last, finished = logged.logs("bill")
    assert finished and last == logged.get("bill").seq
    first, second, talk = items
    assert (first["activity"], first["attempt"], first["outcome"]) == ("charge", 1, "retrying")
    assert [(x["level"], x["logger"]) for x in first["lines"]] == [
        ("info", "ctx"),
        ("info", "tests.integration.logging_tools"),
        ("error", "tests.integration.logging_tools"),
    ]
    assert first["lines"][0]["message"] == "charging 12 with token ***"
    assert first["lines"][1]["message"] == "module says hello on attempt 1"
    assert first["error"] == {"type": "RuntimeError", "message": "declined (***)"}
    assert "in charge" in first["traceback"] and "RuntimeError" in first["traceback"]
    assert (second["attempt"], second["outcome"], second["error"]) == (2, "completed", None)
    assert [x["message"] for x in second["lines"]][1] == "module says hello on attempt 2"
    assert [x["message"] for x in talk["lines"]] == ["line 0", "line 1", "line 2"]
    stored = json.dumps([e.data for e in logged.store.history("bill", tenant="default")])
    assert SECRET not in stored and "not the handler's module" not in stored
    later, _, _ = logged.logs("bill", after_seq=second["seq"])
    assert [x["activity"] for x in later] == ["talk"]


def test_lines_past_the_cap_are_counted_not_kept(logged: Engine) -> None:
    logged.start(FLOW % (MAX_LINES + 50), execution_id="loud")
    drain(logged)
    talk = next(i for i in logged.logs("loud")[0] if i["activity"] == "talk")
    assert len(talk["lines"]) == MAX_LINES + 1
    assert talk["lines"][-1]["message"].startswith("50 more log lines dropped")


def test_an_attempt_that_logs_nothing_records_nothing(store: Store, clock: ManualClock) -> None:
    registry = ActivityRegistry()
    registry.register("quiet", lambda: 1)
    engine = Engine(store, clock=clock, activities=registry)
    engine.start(
        "apiVersion: wovyr/v1\nkind: Workflow\nmetadata: {name: q}\n"
        "activities:\n  - {id: q, tool: quiet}\n",
        execution_id="q",
    )
    drain(engine)
    assert engine.logs("q")[0] == []
    assert all("logs" not in e.data for e in engine.store.history("q", tenant="default"))


def test_json_lines_carry_the_attempt_ids_and_mask_secrets(logged: Engine) -> None:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonLines())
    module = logging.getLogger(logging_tools.__name__)
    module.addHandler(handler)
    try:
        logged.start(FLOW % 1, execution_id="js")
        drain(logged)
    finally:
        module.removeHandler(handler)
    lines = [json.loads(x) for x in out.getvalue().splitlines()]
    assert len(lines) == 3  # hello, declined, hello
    assert {(x["execution_id"], x["activity_id"], x["tenant"]) for x in lines} == {
        ("js", "charge", "default")
    }
    assert [x["attempt"] for x in lines] == [1, 1, 2]
    assert lines[1]["message"] == "card declined for ***"
    assert SECRET not in out.getvalue()


def run_printing(engine: Engine, tool: str, then: str = "") -> tuple[dict[str, Any], str, str]:
    """Run one `tool` step given the secret, with the process's output routed as a server
    routes it (`route_output`) into fresh streams; then print `then` outside the attempt.
    The attempt's logs item, and what reached the process's stdout and stderr."""
    streams = sys.stdout, sys.stderr
    out, err = io.StringIO(), io.StringIO()
    sys.stdout, sys.stderr = out, err
    try:
        route_output()
        flow = FLOW.split("  - id: charge", maxsplit=1)[0] + (
            f'  - {{id: n, tool: {tool}, with: {{token: "${{{{ secrets.CARD_TOKEN }}}}"}}}}\n'
        )
        started = engine.start(flow)
        drain(engine)
        print(then, end="")
    finally:
        sys.stdout, sys.stderr = streams
    assert engine.query(started.id).status == "completed"
    (item,) = engine.logs(started.id)[0]
    return item, out.getvalue(), err.getvalue()


def test_every_log_handler_and_the_printed_output_see_secrets_masked(logged: Engine) -> None:
    """A plain text handler of the process's own (not Wovyr's formatter) on the root logger
    gets masked records, whichever module logged; what the handler printed is kept in the
    attempt's log, masked, and never reaches the process's stdout or stderr."""
    logged.activities.register("noisy", logging_tools.noisy)
    text = io.StringIO()
    handler = logging.StreamHandler(text)
    handler.setFormatter(logging.Formatter("%(name)s %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        item, out, err = run_printing(logged, "noisy", then="after the attempt\n")
    finally:
        root.removeHandler(handler)
    logs = text.getvalue()
    assert "another module sees ***" in logs and "failed with ***" in logs
    assert "ValueError: bad ***" in logs and "Stack (most recent call last)" in logs
    assert SECRET not in logs
    assert (out, err) == ("after the attempt\n", "")  # the process's own output is its own
    printed = [(x["logger"], x["level"], x["message"]) for x in item["lines"]]
    assert ("stdout", "info", "token is *** ok") in printed
    assert ("stderr", "warning", "no newline ***") in printed
    assert SECRET not in json.dumps(item)


def test_a_line_cut_to_its_cap_never_keeps_part_of_a_secret(logged: Engine) -> None:
    logged.activities.register("long_line", logging_tools.long_line)
    item, _, _ = run_printing(logged, "long_line")
    lines = [x["message"] for x in item["lines"]]
    assert len(lines) >= 2 and all(len(x) <= 2_001 for x in lines)  # cut to the cap
    assert lines[0].startswith("x" * 1990 + "***")  # masked before it was cut
    assert SECRET[:6] not in json.dumps(item)
