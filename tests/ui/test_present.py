"""What people read: relative times, "waiting on" in words, timeline lines."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from wovyr.activities.base import ActivityRegistry
from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.server.ui.pages import execution_page
from wovyr.server.ui.present import (
    describe_waiting,
    pretty_json,
    relative,
    time_tag,
    wait_kinds,
    with_times,
)
from wovyr.store.sqlite import SQLiteStore
from wovyr.testing import drain

NOW = datetime(2030, 1, 1, 11, 0, tzinfo=UTC)


def _text(markup: object) -> str:
    """Markup as a person sees it: tags dropped."""
    return re.sub(r"<[^>]+>", "", str(markup))


@pytest.mark.parametrize(
    ("delta", "expected"),
    [
        (timedelta(0), "just now"),
        (timedelta(seconds=-3), "just now"),
        (timedelta(seconds=-40), "40s ago"),
        (timedelta(minutes=5), "in 5m"),
        (timedelta(hours=3), "in 3h"),
        (timedelta(minutes=-58), "1h ago"),
        (timedelta(days=2), "in 2d"),
        (timedelta(days=-400), "1y ago"),
    ],
)
def test_relative(delta: timedelta, expected: str) -> None:
    assert relative(NOW + delta, NOW) == expected


def test_time_tag_has_the_absolute_time_on_hover() -> None:
    tag = str(time_tag("2030-01-01T14:00:00+00:00", NOW))
    assert 'datetime="2030-01-01T14:00:00+00:00"' in tag
    assert 'title="2030-01-01 14:00:00 UTC"' in tag and ">in 3h<" in tag and "data-rel" in tag
    assert ">14:00<" in str(time_tag("2030-01-01T14:00:00+00:00", NOW, clock=True))
    assert ">Jan 02 14:00<" in str(time_tag("2030-01-02T14:00:00Z", NOW, clock=True))
    assert "\u2014" in str(time_tag(None, NOW)) and "\u2014" in str(time_tag("nonsense", NOW))


def test_waiting_on_in_words() -> None:
    text = "timer remind fires 2030-01-01T14:00:00+00:00; approval approve; signal go"
    assert _text(describe_waiting(text, NOW)) == (
        "timer fires 14:00 (in 3h); approval (approve); signal go"
    )
    retry = "retry charge attempt 3 at 2030-01-01T12:04:00+00:00"
    assert _text(describe_waiting(retry, NOW)) == "retry charge 3 at 12:04"
    assert describe_waiting(None, NOW) is None
    assert _text(describe_waiting("something new <b>", NOW)) == "something new &lt;b&gt;"
    assert wait_kinds(text) == {"timer", "approval", "signal"}
    assert wait_kinds(retry) == {"retry"}
    assert wait_kinds(None) == set()
    children = "child o::a; children 2/6 done; items 1/3 done"
    assert _text(describe_waiting(children, NOW)) == children
    assert wait_kinds(children) == {"child"}  # a child wait is no approval


def test_with_times_escapes_and_marks_up_timestamps() -> None:
    out = str(with_times("<x> set for 2030-01-01T14:00:00.123+00:00!", NOW))
    assert out.startswith("&lt;x&gt; set for <time")
    assert out.endswith(")!") and "(<time" in out


def test_pretty_json_truncates_with_the_size() -> None:
    assert pretty_json({"b": 1, "a": [1]}) == '{\n  "a": [\n    1\n  ],\n  "b": 1\n}'
    cut = pretty_json({"x": "y" * 50_000}, limit=100)
    assert cut.startswith('{\n  "x": "yyy') and "truncated: 50,013 characters" in cut


RETRY_AND_TIMER = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: retry-and-timer}
activities:
  - id: charge
    tool: flaky
    retry: {max_attempts: 5, initial_interval: 1h, max_interval: 1h}
  - id: remind
    wait: {timer: {after: 3h}}
"""


def test_retry_and_timer_on_an_execution_page() -> None:
    registry = ActivityRegistry()

    def flaky() -> None:
        raise RuntimeError("card declined")

    registry.register("flaky", flaky)
    clock = ManualClock(NOW)
    with Engine(SQLiteStore(), clock=clock, activities=registry) as engine:
        eid = engine.start(RETRY_AND_TIMER).id
        drain(engine)
        page = execution_page(engine, eid, clock.now())
        waiting = _text(page.waiting)
        assert "retry charge 2/5 at 12:00" in waiting
        assert "timer fires 14:00 (in 3h)" in waiting
        rows = {r["id"]: r for r in page.activities}
        assert rows["charge"]["status"] == "retrying" and rows["charge"]["max_attempts"] == 5
        assert rows["charge"]["detail"] == "card declined"
        assert rows["remind"]["kind"] == "timer"
        assert 'data-activity="charge" data-status="retrying"' in page.svg
        lines = [(e.category, _text(e.text)) for e in page.events]
        assert any(c == "retry" and "charge attempt 1 failed" in t for c, t in lines)
        assert any(c == "timer" and "remind:timer" in t for c, t in lines)


def test_timeline_pages_through_long_histories() -> None:
    chatty = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: chatty}
activities:
  - id: hold
    wait: {signal: never}
"""
    clock = ManualClock(NOW)
    with Engine(SQLiteStore(), clock=clock) as engine:
        eid = engine.start(chatty).id
        for i in range(450):
            engine.signal(eid, f"noise{i % 3}")
        total = engine.query(eid).event_count
        latest = execution_page(engine, eid, clock.now())
        first = execution_page(engine, eid, clock.now(), events_from=0)
    assert len(latest.events) == 200 and latest.events[-1].seq == total
    assert latest.newer is None and latest.older == total - 400
    assert first.events[0].seq == 1 and first.newer == 200 and first.older is None


def test_a_recovered_attempt_reads_as_a_re_run_not_as_a_retry() -> None:
    from wovyr.events import ActivityStarted, CompensationStepStarted
    from wovyr.server.ui.present import timeline
    from wovyr.store.base import EventRecord

    events = [
        ActivityStarted(activity="s", attempt=1, key="e/s/1").at(NOW),
        ActivityStarted(activity="s", attempt=1, key="e/s/1", recovery=2).at(NOW),
        CompensationStepStarted(activity="s", attempt=1, recovery=1).at(NOW),
    ]
    records = [EventRecord("e", i, e.type, e.at, e.data) for i, e in enumerate(events, 1)]
    lines = [(e.category, _text(e.text)) for e in timeline(records, NOW)]
    assert lines == [
        ("attempt", "s attempt 1 started"),
        ("attempt", "s attempt 1 started again: its worker was lost (recovery 2)"),
        (
            "compensation",
            "compensating s (attempt 1) started again: its worker was lost (recovery 1)",
        ),
    ]


def test_an_agents_model_and_tool_calls_read_as_a_conversation() -> None:
    from wovyr.events import ModelCallCompleted, ToolCallCompleted
    from wovyr.server.ui.present import timeline
    from wovyr.store.base import EventRecord

    asked = {"role": "assistant", "content": None, "tool_calls": [{"id": "c1"}, {"id": "c2"}]}
    usage = {"input_tokens": 120, "output_tokens": 30}
    events = [
        ModelCallCompleted(
            activity="think",
            turn=1,
            attempt=1,
            message=asked,
            usage=usage,
            cost=None,
            model="m1",
            finish_reason="tool_calls",
        ).at(NOW),
        ToolCallCompleted(
            activity="think", turn=1, call_id="c1", tool="math.add", arguments={}, result=5
        ).at(NOW),
        ToolCallCompleted(
            activity="think",
            turn=1,
            call_id="c2",
            tool="explode",
            arguments={},
            result=None,
            error={"type": "RuntimeError", "message": "the tool broke"},
        ).at(NOW),
        ModelCallCompleted(
            activity="think",
            turn=2,
            attempt=1,
            message={"role": "assistant", "content": "5"},
            usage=usage,
            cost=0.1,
            model="m1",
            finish_reason="stop",
        ).at(NOW),
    ]
    records = [EventRecord("e", i, e.type, e.at, e.data) for i, e in enumerate(events, 1)]
    lines = [(e.category, _text(e.text)) for e in timeline(records, NOW)]
    assert lines == [
        ("attempt", "think turn 1: model m1 asked for 2 tool calls (120 in, 30 out tokens)"),
        ("attempt", "think turn 1: tool math.add returned"),
        ("failure", "think turn 1: tool explode failed: RuntimeError: the tool broke"),
        ("attempt", "think turn 2: model m1 answered (120 in, 30 out tokens, $0.1000)"),
    ]


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [(0.0, "+0.00s"), (1.25, "+1.25s"), (42.9, "+42s"), (185, "+3m 05s"), (7260, "+2h 01m")],
)
def test_duration_text(seconds: float, expected: str) -> None:
    from wovyr.server.ui.present import duration_text

    assert duration_text(seconds) == expected


def test_timeline_has_human_names_absolute_times_and_gaps() -> None:
    from wovyr.events import ActivityCompleted, ActivityStarted
    from wovyr.server.ui.present import event_name, timeline
    from wovyr.store.base import EventRecord

    assert event_name("WorkflowContinuedAsNew") == "Workflow continued as new"
    assert event_name("ActivityStarted") == "Activity started"
    later = NOW + timedelta(seconds=90, milliseconds=250)
    events = [
        ActivityStarted(activity="s", attempt=1, key="e/s/1").at(NOW),
        ActivityCompleted(activity="s", attempt=1, output=1).at(later),
    ]
    records = [EventRecord("e", i, e.type, e.at, e.data) for i, e in enumerate(events, 1)]
    first, second = timeline(records, NOW)
    assert (first.name, first.clock, first.delta) == ("Activity started", "11:00:00.000", "")
    assert (second.name, second.clock, second.delta) == (
        "Activity completed",
        "11:01:30.250",
        "+1m 30s",
    )


def test_map_items_and_their_compensation_read_by_index() -> None:
    from tests.ui.test_routes import SAGA_MAP

    with Engine(SQLiteStore(), clock=ManualClock(NOW)) as engine:
        eid = engine.start(SAGA_MAP).id
        drain(engine)
        page = execution_page(engine, eid, NOW)
        lines = [(e.category, _text(e.text)) for e in page.events]
        assert ("attempt", "lines[0] attempt 1 started") in lines
        assert ("attempt", "lines[2] completed") in lines
        assert ("compensation", "compensating lines[1] (attempt 1)") in lines
        assert ("compensation", "lines[1] compensated") in lines
        assert ("compensation", "reserve compensated") in lines
        assert not any(t in ("ItemStarted", "ItemCompleted") for _, t in lines)
