"""Statuses are `StrEnum`s whose members are their strings: a checkpoint folded with members
is stored as the very JSON text it held when statuses were plain strings, a status read
back from the store (a `str`) equals its member, and expressions read statuses as text."""

from __future__ import annotations

import json

import pytest
from tests.unit.engine.test_old_logs import LOGS, events_of

from wovyr.engine.core.context import ActivitiesView
from wovyr.engine.core.state import ActivityStatus, ExecutionStatus, fold, state_to_json
from wovyr.store.codec import dumps


def test_members_are_their_strings() -> None:
    assert [str(s) for s in ExecutionStatus] == [
        "running",
        "completed",
        "failed",
        "cancelled",
        "continued",
    ]
    assert ExecutionStatus.FAILED == "failed" and hash(ExecutionStatus.FAILED) == hash("failed")
    assert "failed" in ExecutionStatus.TERMINAL and "running" not in ExecutionStatus.TERMINAL
    assert f"{ActivityStatus.COMPENSATION_FAILED}" == "compensation_failed"
    assert {"retrying": 1}[ActivityStatus.RETRYING] == 1
    assert ActivityStatus.SKIPPED in ActivityStatus.DONE_OK
    assert "retrying" in ActivityStatus.ACTIVE and "pending" not in ActivityStatus.ACTIVE


@pytest.mark.parametrize("execution_id", sorted(LOGS))
def test_a_checkpoint_is_stored_as_the_same_text(execution_id: str) -> None:
    log = LOGS[execution_id]
    checkpoint = state_to_json(fold(events_of(log), id=execution_id))
    plain = json.loads(json.dumps(checkpoint))  # every member turned into a plain str
    assert dumps(checkpoint) == dumps(plain)
    assert json.dumps(checkpoint, sort_keys=True) == json.dumps(plain, sort_keys=True)


def test_an_expression_reads_an_activity_status_as_text() -> None:
    log = LOGS[sorted(LOGS)[0]]
    state = fold(events_of(log), id=sorted(LOGS)[0])
    view = ActivitiesView(state.activities)
    for activity_id in view:
        assert type(view[activity_id]["status"]) is str
