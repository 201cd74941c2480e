"""Responses paged by bytes: no page of the API holds much more than `max_page_bytes` of JSON
(`WOVYR_MAX_PAGE_BYTES`, 4 MiB), whatever an execution holds.

- History pages stop before the event that would pass the budget (one event at least: an
  event holds at most a few values of `WOVYR_MAX_PAYLOAD_BYTES`); `next_after_seq` goes on
  from the last one given. The newest page (no `after_seq`) is the newest events that fit.
- An execution's detail holds its view whole but for the items of its `for_each`
  activities, given in order while they fit (`items_total` says how many there are,
  `items_next` the index the rest start at: `GET .../activities/{activity}/items?start=N`
  pages them), and its newest events (`timeline`) as far as a quarter of the budget goes.

Sizes are those of the values' JSON (orjson, as the stores and the encoder of responses
write them), counted as each value is read: a page never reads far past what it answers.

Every list pages the same way for clients: `cursor` in, `next_cursor` out (None: the last
page). A cursor is opaque (base64url of the position's JSON: a sequence number, an index,
a key, or a time and an id); a cursor this API did not return is a 400. The older
parameters (`after_seq`, `start`, `after`) still work beside it.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterator
from datetime import datetime
from typing import Annotated, Any, TypeVar, overload

from fastapi import Query

from wovyr.engine.engine import Engine
from wovyr.errors import Problem
from wovyr.server.problems import ApiProblem
from wovyr.store.base import EventRecord
from wovyr.store.codec import from_micros, json_bytes, to_micros

__all__ = [
    "MAX_INDEX",
    "Cursor",
    "decode_cursor",
    "encode_cursor",
    "event_bytes",
    "events_after",
    "index_at",
    "items_page",
    "newest_events",
    "opaque",
    "page_items",
    "position",
]

T = TypeVar("T")
Cursor = Annotated[
    str | None,
    Query(
        max_length=500,
        description="The `next_cursor` of the page before (absent: the first page).",
    ),
]


def opaque(value: Any) -> str | None:
    """The cursor for a position (None: no next page)."""
    if value is None:
        return None
    raw = json.dumps(value, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _bad_cursor() -> ApiProblem:
    return ApiProblem(
        400, "The cursor is not one this API returned.", problems=[Problem("bad cursor", "cursor")]
    )


def position(text: str | None, kind: type[T]) -> T | None:
    """The position a cursor of `opaque` holds, of type `kind` (None: no cursor)."""
    if not text:
        return None
    try:
        value = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except (ValueError, TypeError, binascii.Error, RecursionError):
        raise _bad_cursor() from None
    if not isinstance(value, kind) or isinstance(value, bool):
        raise _bad_cursor()
    return value


# the largest index or sequence number a store holds (a signed 64-bit integer): a larger
# one is refused as a bad request, never handed to the database
MAX_INDEX = 2**63 - 1


@overload
def index_at(text: str | None, given: int) -> int: ...
@overload
def index_at(text: str | None, given: int | None) -> int | None: ...
def index_at(text: str | None, given: int | None) -> int | None:
    """The index or sequence number a cursor holds (it wins), else `given` (the older
    parameter)."""
    value = position(text, int)
    if value is None:
        return given
    if not 0 <= value <= MAX_INDEX:
        raise _bad_cursor()
    return value


def encode_cursor(cursor: tuple[datetime, str] | None) -> str | None:
    """A keyset cursor (a time and an id) as `opaque` writes it."""
    return None if cursor is None else opaque([to_micros(cursor[0]), cursor[1]])


def decode_cursor(text: str | None) -> tuple[datetime, str] | None:
    value = position(text, list)
    if value is None:
        return None
    try:
        micros, ident = value
        if not isinstance(micros, int) or not isinstance(ident, str):
            raise ValueError
        return from_micros(micros), ident
    except (ValueError, TypeError, OverflowError):
        raise _bad_cursor() from None


_BATCH = 16  # events read at a time
_EVENT = 80  # what an event costs besides its data: seq, type, time, keys


def event_bytes(event: EventRecord) -> int:
    return _EVENT + len(event.type) + json_bytes(event.data)


def events_after(
    engine: Engine, execution_id: str, after_seq: int, limit: int, budget: int
) -> list[EventRecord]:
    """Up to `limit` events of the run `execution_id` after `after_seq`, as many as fit in
    `budget` bytes (one at least)."""
    out: list[EventRecord] = []
    used, position = 0, after_seq
    while len(out) < limit:
        want = min(_BATCH, limit - len(out))
        batch = engine.history(execution_id, position, want, follow=False)
        for event in batch:
            size = event_bytes(event)
            if out and used + size > budget:
                return out
            out.append(event)
            used += size
        if len(batch) < want:
            break
        position = batch[-1].seq
    return out


def newest_events(
    engine: Engine, execution_id: str, total: int, limit: int, budget: int
) -> list[EventRecord]:
    """The newest events of the run `execution_id` (of `total`): up to `limit`, as many as
    fit in `budget` bytes (one at least when `limit` allows), oldest first."""
    out: list[EventRecord] = []
    used, end = 0, total
    while end > 0 and len(out) < limit:
        start = max(end - min(_BATCH, limit - len(out)), 0)
        batch = engine.history(execution_id, start, end - start, follow=False)
        for event in reversed(batch):
            size = event_bytes(event)
            if out and used + size > budget:
                out.reverse()
                return out
            out.append(event)
            used += size
        end = start
    out.reverse()
    return out


def page_items(view: dict[str, Any], budget: int) -> dict[str, Any]:
    """`view` (an execution view's dict) with its `for_each` activities' items cut to what
    fits in `budget` once the rest of the view is counted: each such activity gets
    `items_total` and `items_next` (the index its page stops at, None when whole)."""
    mapped = {k: a for k, a in view["activities"].items() if a.get("items") is not None}
    if not mapped:
        return view
    rest = dict(view)
    rest["activities"] = {
        k: {**a, "items": None} if k in mapped else a for k, a in view["activities"].items()
    }
    left = budget - json_bytes(rest)
    activities = dict(view["activities"])
    for key, act in mapped.items():
        items = act["items"]
        kept = _fitting(iter(items), left)
        left -= sum(json_bytes(i) + 1 for i in items[:kept])
        activities[key] = {
            **act,
            "items": items[:kept] if kept < len(items) else items,
            "items_total": len(items),
            "items_next": kept if kept < len(items) else None,
        }
    return {**view, "activities": activities}


def items_page(
    items: list[dict[str, Any]], start: int, limit: int, budget: int
) -> tuple[list[dict[str, Any]], int | None]:
    """The items from index `start`: up to `limit`, as many as fit in `budget` (one at
    least), and the index the next page starts at (None: none left)."""
    window = items[start : start + limit]
    kept = max(1, _fitting(iter(window), budget)) if window else 0
    end = start + kept
    return window[:kept], end if end < len(items) else None


def _fitting(items: Iterator[dict[str, Any]], budget: int) -> int:
    """How many of `items`, from the first, fit in `budget` bytes."""
    count = used = 0
    for item in items:
        used += json_bytes(item) + 1
        if used > budget:
            break
        count += 1
    return count
