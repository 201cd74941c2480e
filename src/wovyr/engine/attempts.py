"""The attempts of an execution as its history tells them: for each attempt that logged
something or failed, its log lines (`logs` on its result event), its error and the
handler's traceback. Read from the events, so they are as durable as the result itself."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from wovyr.events import EventType
from wovyr.store.base import EventRecord

__all__ = ["attempt_entries"]

_ENDS = {
    EventType.ACTIVITY_COMPLETED: "completed",
    EventType.ACTIVITY_FAILED: "failed",
    EventType.ITEM_COMPLETED: "completed",
    EventType.ITEM_FAILED: "failed",
    EventType.ITERATION_COMPLETED: "completed",
    EventType.ACTIVITY_COMPENSATED: "compensated",
    EventType.COMPENSATION_ATTEMPT_FAILED: "compensation failed",
    EventType.COMPENSATION_FAILED: "compensation failed",
}
_STARTS = frozenset(
    {EventType.ACTIVITY_STARTED, EventType.ITEM_STARTED, EventType.COMPENSATION_STEP_STARTED}
)


def attempt_entries(events: Iterable[EventRecord]) -> list[dict[str, Any]]:
    """One entry per ended attempt with log lines or an error, in history order:
    `seq`, `at`, `activity`, `index` (an item's), `attempt`, `outcome` (`completed`,
    `failed`, `retrying`, ...), `started_at`, `lines`, `error` ({type, message}) and
    `traceback` (the handler's frames, when it raised)."""
    started: dict[tuple[str, Any], str] = {}
    out: list[dict[str, Any]] = []
    for event in events:
        data = event.data
        key = (str(data.get("activity")), data.get("index"))
        if event.type in _STARTS:
            started[key] = event.at.isoformat()
            continue
        outcome = _ENDS.get(event.type)
        if outcome is None:
            continue
        lines = data.get("logs") or []
        error = data.get("error") if isinstance(data.get("error"), dict) else None
        if not lines and error is None:
            continue
        if data.get("will_retry"):
            outcome = "retrying"
        out.append(
            {
                "seq": event.seq,
                "at": event.at.isoformat(),
                "activity": key[0],
                "index": key[1],
                "attempt": data.get("attempt"),
                "outcome": outcome,
                "started_at": started.get(key),
                "lines": list(lines),
                "error": None
                if error is None
                else {"type": error.get("type"), "message": error.get("message")},
                "traceback": error.get("traceback") if error is not None else None,
            }
        )
    return out
