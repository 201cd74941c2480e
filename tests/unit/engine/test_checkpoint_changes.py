"""A step's `CheckpointChanges` (what a store may write instead of the whole checkpoint),
folded over the checkpoint before it, give the whole checkpoint after it: for every step
of every stored sample log (the golden logs cover every event type), in steps of one,
two and three events. And the ledger that decides between a delta and a whole write."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from tests.unit.engine.test_old_logs import LOGS, events_of

from wovyr.engine.core.state import ActivityState, apply, fold, state_to_json
from wovyr.engine.steps import checkpoint_changes, make_step
from wovyr.events import Event
from wovyr.store.checkpoints import DELTA_FROM, MAX_DELTAS, Ledger, merged
from wovyr.store.codec import dumps
from wovyr.store.records import CheckpointChanges, StepWrite

NOW = datetime(2030, 1, 1, tzinfo=UTC)


def _stored(value: Any) -> Any:
    """What a store reads back of `value`."""
    return json.loads(dumps(value))


@pytest.mark.parametrize("execution_id", sorted(LOGS))
@pytest.mark.parametrize("per_step", [1, 2, 3])
def test_the_changes_folded_over_the_checkpoint_before_give_the_one_after(
    execution_id: str, per_step: int
) -> None:
    events = events_of(LOGS[execution_id])
    before = fold(events[:1], id=execution_id)
    for start in range(1, len(events), per_step):
        after = before
        for event in events[start : start + per_step]:
            after = apply(after, event)
        whole = state_to_json(after)
        changes = checkpoint_changes(before, after, whole)
        assert changes is not None  # the logs only ever add activities at the end
        folded = merged(_stored(state_to_json(before)), [_stored(changes.as_json())])
        assert folded == _stored(whole)
        before = after


_WIDEST = max(LOGS, key=lambda k: len(LOGS[k]["checkpoint"]["activities"]))


def test_a_step_changes_only_the_activities_its_events_touch() -> None:
    events = events_of(LOGS[_WIDEST])
    state = fold(events, id="x")
    assert len(state.activities) >= 3
    key = next(iter(state.activities))
    after = replace(state, seq=state.seq + 1, activities={**state.activities, key: ActivityState()})
    changes = checkpoint_changes(state, after, state_to_json(after))
    assert changes is not None
    assert list(changes.activities) == [key] and dict(changes.set) == {"seq": state.seq + 1}


def test_a_step_that_drops_or_reorders_activities_has_no_changes() -> None:
    state = fold(events_of(LOGS[_WIDEST]), id="x")
    assert len(state.activities) >= 2
    _, *rest = state.activities
    dropped = replace(state, activities={k: state.activities[k] for k in rest})
    assert checkpoint_changes(state, dropped, state_to_json(dropped)) is None
    moved = {"new": ActivityState(), **state.activities}  # a new one, but first
    inserted = replace(state, activities=moved)
    assert checkpoint_changes(state, inserted, state_to_json(inserted)) is None
    appended = replace(state, activities={**state.activities, "new": ActivityState()})
    changes = checkpoint_changes(state, appended, state_to_json(appended))
    assert changes is not None and list(changes.activities) == ["new"]


def test_make_step_carries_the_changes() -> None:
    events = events_of(LOGS[sorted(LOGS)[0]])
    before = fold(events[:2], id="x")
    after = apply(before, events[2])
    step = make_step("x", before, after, [events[2]], NOW, tenant="default", ready=True)
    assert step.changes is not None
    assert merged(state_to_json(before), [step.changes.as_json()]) == step.checkpoint


# --- the ledger ---------------------------------------------------------------------------


def _wide(seq: int, n: int = 60) -> dict[str, Any]:
    return {"seq": seq, "activities": {f"a{i}": {"note": "x" * 80, "i": i} for i in range(n)}}


def _step(seq: int, *, status: str = "running", events: int = 1, small: bool = False) -> StepWrite:
    checkpoint = {"seq": seq + events} if small else _wide(seq + events)
    return StepWrite(
        execution_id="e1",
        expected_seq=seq,
        events=[Event("Thing", NOW, {})] * events,
        checkpoint=checkpoint,
        status=status,
        updated_at=NOW,
        changes=CheckpointChanges(set={"seq": seq + events}, drop=(), activities={"a1": {}}),
    )


def test_the_ledger_writes_a_delta_only_on_a_base_it_wrote_at_the_expected_seq() -> None:
    ledger = Ledger()
    first = _step(1)
    plan = ledger.plan(first)
    assert plan.whole is not None and plan.delta is None and plan.prior is None  # unknown
    assert len(plan.whole) >= DELTA_FROM
    ledger.wrote(first, plan)
    second = ledger.plan(_step(2))
    assert second.delta is not None and second.whole is None and second.prior == len(plan.whole)
    assert ledger.plan(_step(5)).whole is not None  # another seq: someone else wrote since
    assert ledger.plan(_step(2, events=0)).whole is not None  # no seq of its own
    assert ledger.plan(_step(2, status="completed")).whole is not None  # the end: one base
    ledger.forget(("default", "e1"))
    assert ledger.plan(_step(2)).whole is not None


def test_the_ledger_compacts_when_the_deltas_outweigh_the_base_or_reach_the_cap() -> None:
    ledger = Ledger()
    seq = 1
    step = _step(seq)
    plan = ledger.plan(step)
    ledger.wrote(step, plan)
    base = len(plan.whole or "")
    run = 0
    for seq in range(2, 2 + MAX_DELTAS + 5):
        step = _step(seq)
        plan = ledger.plan(step)
        ledger.wrote(step, plan)
        if plan.whole is not None:
            break
        run += 1
    delta = len(dumps(_step(2).changes.as_json()))  # type: ignore[union-attr]
    assert run == min(MAX_DELTAS, base // delta)  # then a whole write


def test_a_small_checkpoint_is_always_written_whole() -> None:
    ledger = Ledger()
    for seq in range(1, 5):
        step = _step(seq, small=True)
        plan = ledger.plan(step)
        assert plan.whole is not None
        ledger.wrote(step, plan)


def test_the_ledger_is_bounded_and_forgets_the_oldest() -> None:
    ledger = Ledger(size=3)
    for i in range(5):
        step = replace(_step(1), execution_id=f"e{i}")
        ledger.wrote(step, ledger.plan(step))
    assert len(ledger) == 3
    oldest = replace(_step(2), execution_id="e0")
    assert ledger.plan(oldest).whole is not None
    newest = replace(_step(2), execution_id="e4")
    assert ledger.plan(newest).delta is not None
    unplain = replace(_step(2), execution_id="e4", changes=None)  # e.g. sealed
    ledger.wrote(unplain, ledger.plan(unplain))
    assert ledger.plan(replace(_step(3), execution_id="e4")).whole is not None
