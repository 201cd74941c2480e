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


def test_the_shown_statuses_are_defined_once_and_every_reader_takes_them() -> None:
    from typing import get_args

    from wovyr.cli.commands_workflows import list_command
    from wovyr.engine.bulk import STATUSES
    from wovyr.server.api.models import Status
    from wovyr.server.ui.pages import LIST_STATUSES
    from wovyr.statuses import SHOWN_STATUSES, ChildStatus, ShownStatus

    assert SHOWN_STATUSES == ("running", "waiting", "completed", "failed", "cancelled", "continued")
    assert STATUSES is SHOWN_STATUSES and LIST_STATUSES is SHOWN_STATUSES
    # the API's schema spells the same list (a Literal: the OpenAPI document holds an enum)
    assert get_args(Status) == SHOWN_STATUSES
    choice = next(p for p in list_command.params if p.name == "status")
    assert tuple(choice.type.choices) == SHOWN_STATUSES  # type: ignore[attr-defined]
    assert set(ExecutionStatus) <= set(ShownStatus)
    assert [str(s) for s in ChildStatus] == ["completed", "failed", "timed_out"]


def test_batch_statuses_and_finished_executions_are_the_same_text_as_stored() -> None:
    from typing import get_args

    from wovyr.server.api.models import BatchOut
    from wovyr.statuses import BatchStatus
    from wovyr.store.records import FINISHED

    assert [str(s) for s in BatchStatus] == ["running", "completed"]
    # the API's schema spells the same pair
    assert set(get_args(BatchOut.model_fields["status"].annotation)) == set(BatchStatus)
    assert set(FINISHED) == ExecutionStatus.TERMINAL
    assert FINISHED == ("cancelled", "completed", "continued", "failed")
