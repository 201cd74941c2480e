"""The stored event JSON is the compatibility contract: logs written by an earlier engine
(`golden/logs.json`, made by `golden/make_logs.py`) still fold to exactly the checkpoint
that engine stored, and every stored event reads back as its typed record."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from wovyr.engine.core.state import fold, state_to_json
from wovyr.events import Event

LOGS: dict[str, Any] = json.loads(
    Path(__file__).with_name("golden").joinpath("logs.json").read_text()
)


def events_of(log: dict[str, Any]) -> list[Event]:
    return [Event(e["type"], datetime.fromisoformat(e["at"]), e["data"]) for e in log["events"]]


@pytest.mark.parametrize("execution_id", sorted(LOGS))
def test_an_old_log_folds_to_the_checkpoint_it_was_stored_with(execution_id: str) -> None:
    log = LOGS[execution_id]
    state = fold(events_of(log), id=execution_id)
    assert json.loads(json.dumps(state_to_json(state))) == log["checkpoint"]
    assert state.status == log["status"]


def test_the_old_logs_cover_every_event_type() -> None:
    from wovyr.events import EventType

    seen = {e["type"] for log in LOGS.values() for e in log["events"]}
    every = {v for k, v in vars(EventType).items() if k.isupper()}
    assert seen == every
