"""`repeat` in the pure decider: an activity runs again until `until` holds, with a durable
timer of `every` between iterations, retries per iteration, `max_iterations` ending it as
`on_exhausted` says; each iteration has its own idempotency keys; the checkpoint stays the
same size however many iterations ran."""

from __future__ import annotations

import json
import textwrap
from datetime import UTC, datetime, timedelta
from typing import Any

from wovyr.definition import load_definition
from wovyr.definition.model import Workflow
from wovyr.engine.core.decide import Outcome, RunActivity, decide, outcome_events, start_events
from wovyr.engine.core.state import ExecutionState, fold, state_to_json
from wovyr.events import Event, TimerFired

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def wf(body: str) -> Workflow:
    head = "apiVersion: wovyr/v1\nkind: Workflow\nmetadata: {name: poll}\n"
    return load_definition(head + textwrap.dedent(body))


class Loop:
    """Drives one execution like a worker: answers attempts, fires timers when due."""

    def __init__(self, definition: Workflow) -> None:
        self.definition = definition
        self.now = T0
        self.events: list[Event] = []
        self.state = self._decide(fold(self._log(start_events(definition, "h", {}, T0)), id="ex"))
        self.pending: list[RunActivity] = list(self._runs)

    def _log(self, events: list[Event]) -> list[Event]:
        self.events.extend(events)
        return events

    def _decide(self, state: ExecutionState) -> ExecutionState:
        decision = decide(self.definition, state, self.now)
        assert decision.state is not None
        self._log(decision.events)
        self._runs = decision.runs
        return decision.state

    def answer(self, outcome: Outcome) -> RunActivity:
        run = self.pending.pop(0)
        produced = outcome_events(self.definition, self.state, run, outcome, self.now)
        self.state = self._decide(fold(self._log(produced), self.state))
        self.pending += self._runs
        return run

    def fire_due(self) -> int:
        due = [t for t, v in self.state.timers.items() if v["fire_at"] <= self.now.isoformat()]
        fired = [TimerFired(timer=t, fired_at=self.now.isoformat()).at(self.now) for t in due]
        if fired:
            self.state = self._decide(fold(self._log(fired), self.state))
            self.pending += self._runs
        return len(fired)

    def types(self, name: str) -> list[Event]:
        return [e for e in self.events if e.type == name]


POLL = wf(
    """
    activities:
      - id: poll
        tool: jobs.check
        with: {n: "${{ iteration }}"}
        retry: {max_attempts: 2, initial_interval: 0}
        repeat:
          until: "${{ output.state == 'done' }}"
          every: 1m
          max_iterations: 10
    output:
      last: "${{ activities.poll.output }}"
      iterations: "${{ activities.poll.iterations }}"
    """
)


def test_polls_until_done_with_a_durable_timer_between_iterations() -> None:
    loop = Loop(POLL)
    calls: list[RunActivity] = []
    for n in range(1, 5):
        assert [r.input for r in loop.pending] == [{"n": n}]  # rendered per iteration
        calls.append(loop.answer(Outcome(output={"state": "done" if n == 4 else "running"})))
        if n < 4:
            wait = loop.state.activity("poll").wait
            assert wait == {"kind": "repeat", "iteration": n + 1, "at": loop.state.activity(
                "poll").next_attempt_at}  # fmt: skip
            assert loop.pending == []  # nothing runs before the timer fires
            assert loop.fire_due() == 0
            loop.now += timedelta(minutes=1)
            assert loop.fire_due() == 1

    assert len(calls) == 4 and [r.iteration for r in calls] == [1, 2, 3, 4]
    assert len(loop.types("TimerArmed")) == 3
    assert loop.state.status == "completed"
    assert loop.state.output == {"last": {"state": "done"}, "iterations": 4}
    keys = [e.data["key"] for e in loop.types("ActivityStarted")]
    assert keys == ["ex/poll/1", "ex/poll~2/1", "ex/poll~3/1", "ex/poll~4/1"]


def test_retries_apply_per_iteration_and_attempts_restart_at_one() -> None:
    loop = Loop(POLL)
    loop.answer(Outcome(output={"state": "running"}))
    loop.now += timedelta(minutes=1)
    loop.fire_due()
    failed = loop.answer(Outcome(error={"type": "Flaky", "message": "x"}, retryable=True))
    assert (failed.iteration, failed.attempt) == (2, 1)
    retried = loop.answer(Outcome(output={"state": "done"}))
    assert (retried.iteration, retried.attempt) == (2, 2)
    assert [e.data["key"] for e in loop.types("ActivityStarted")][-1] == "ex/poll~2/2"
    assert loop.state.status == "completed"


def test_a_stale_result_of_an_earlier_iteration_is_refused() -> None:
    loop = Loop(POLL)
    first = loop.pending[0]
    loop.answer(Outcome(output={"state": "running"}))
    loop.now += timedelta(minutes=1)
    loop.fire_due()
    assert (
        outcome_events(POLL, loop.state, first, Outcome(output={"state": "done"}), loop.now) == []
    )


def test_max_iterations_fails_or_continues_as_configured() -> None:
    for on_exhausted, status in (("fail", "failed"), ("continue", "completed")):
        flow = wf(
            f"""
            activities:
              - id: poll
                tool: t
                repeat: {{until: "${{{{ output == 'done' }}}}", max_iterations: 3,
                          on_exhausted: {on_exhausted}}}
            output: "${{{{ activities.poll.exhausted }}}}"
            """
        )
        loop = Loop(flow)
        for _ in range(3):
            loop.answer(Outcome(output="no"))
        assert loop.state.status == status, on_exhausted
        assert loop.state.activity("poll").iterations == 3
        assert loop.state.activity("poll").exhausted is True
        if status == "failed":
            error: Any = loop.state.error
            assert error["error"]["type"] == "RepeatExhausted"
        else:
            assert loop.state.output is True


def test_an_until_that_cannot_be_evaluated_fails_the_activity() -> None:
    flow = wf(
        """
        activities:
          - {id: poll, tool: t, repeat: {until: "${{ output.missing.deeper }}"}}
        """
    )
    loop = Loop(flow)
    loop.answer(Outcome(output={}))
    assert loop.state.status == "failed"
    assert loop.state.activity("poll").error["type"] == "ExpressionError"  # type: ignore[index]


def test_a_set_step_repeats_within_one_decision() -> None:
    flow = wf(
        """
        activities:
          - id: count
            set: {n: "${{ iteration }}"}
            repeat: {until: "${{ output.n == 5 }}", max_iterations: 10}
        output: "${{ activities.count.output.n }}"
        """
    )
    loop = Loop(flow)
    assert loop.state.status == "completed" and loop.state.output == 5
    assert len(loop.types("IterationCompleted")) == 5


def test_ten_thousand_iterations_keep_the_checkpoint_size_and_per_iteration_work_flat() -> None:
    flow = wf(
        """
        activities:
          - id: poll
            tool: t
            with: {n: "${{ iteration }}"}
            repeat: {until: "${{ iteration == 10000 }}", every: 1s, max_iterations: 20000}
        """
    )
    loop = Loop(flow)
    sizes: dict[int, int] = {}
    events_per: dict[int, int] = {}
    for n in range(1, 10_001):
        before = len(loop.events)
        loop.answer(Outcome(output={"n": n}))
        loop.now += timedelta(seconds=1)
        loop.fire_due()
        events_per[n] = len(loop.events) - before
        if n in (10, 100, 1_000, 9_999):
            sizes[n] = len(json.dumps(state_to_json(loop.state)))
    assert loop.state.status == "completed"
    assert loop.state.activity("poll").iterations == 10_000
    # the checkpoint holds the last output only: from iteration 10 to 9,999 it grows by the
    # extra digits of a few numbers (iteration, input, output, seq), not per iteration
    assert sizes[9_999] - sizes[10] <= 16, sizes
    # every iteration records the same events (result, timer armed and fired, next start)
    assert set(list(events_per.values())[1:-1]) == {5}
    print(f"checkpoint bytes by iteration {sizes}; events per iteration 5")
