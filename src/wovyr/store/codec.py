"""Encoding shared by the stores: JSON text and integer-microsecond UTC times.

orjson does the common case (several times faster than the standard library, and this sits
on every step's path); values it refuses (integers beyond 64 bits, nesting deeper than 254,
strings with lone surrogates) go through the standard library, which stores them or raises
the same clear `TypeError` as before. JSON has no NaN or infinity: such floats are stored as
null.

Caps on what is stored (`check_payload`): a value nested deeper than `MAX_DEPTH` (64) or
whose JSON is larger than a byte cap (`MAX_PAYLOAD_BYTES`, 2 MiB, by default) is refused
with `PayloadRefused` before anything holds it, so nothing accepted can later fail to load.
Rows written before the caps may still hold deeper values: `loads` reads them whatever
their depth (a value too deep for both parsers reads as a marker, never an exception).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any

import orjson

from wovyr.errors import WovyrError

__all__ = [
    "JSON_TEXT",
    "MAX_DEPTH",
    "MAX_PAYLOAD_BYTES",
    "PayloadRefused",
    "check_payload",
    "dumps",
    "from_micros",
    "json_bytes",
    "json_depth",
    "loads",
    "shallow",
    "to_micros",
]

MAX_DEPTH = 64  # arrays and objects inside each other
MAX_PAYLOAD_BYTES = 2 * 1024 * 1024  # bytes of JSON of one stored value
UNREADABLE = {"unreadable": "a value nested too deeply to read"}
TOO_DEEP = {"unreadable": f"a value nested more than {MAX_DEPTH} levels deep (not shown)"}

#: A record field's metadata (`field(metadata=JSON_TEXT)`): its column holds the value's JSON
#: as text in both stores (PostgreSQL `text`, not `json`), so reading it parses the text
#: whichever the driver (`wovyr.store.rows.from_row`).
JSON_TEXT: Mapping[str, str] = MappingProxyType({"column": "json text"})

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Non-string keys become strings as `json` does; dataclasses are not data we store.
_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATACLASS


def dumps(value: Any) -> str:
    try:
        return orjson.dumps(value, default=_default, option=_OPTIONS).decode()
    except orjson.JSONEncodeError:
        return json.dumps(
            _finite(value), separators=(",", ":"), ensure_ascii=False, default=_default
        )


def json_bytes(value: Any) -> int:
    """The bytes of `value` as stored (its JSON, as `dumps` writes it)."""
    try:
        return len(orjson.dumps(value, default=_default, option=_OPTIONS))
    except orjson.JSONEncodeError:
        return len(dumps(value).encode("utf-8", "surrogatepass"))


def loads(text: str | bytes | None) -> Any:
    if text is None:
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:  # e.g. NaN written by an earlier version, or too deep
        try:
            return json.loads(text)
        except RecursionError:  # deeper than even the standard library reads
            return dict(UNREADABLE)


class PayloadRefused(WovyrError):
    """A value the store will not keep: `type` is "PayloadTooLarge" or "PayloadTooDeep"."""

    def __init__(self, type: str, message: str) -> None:
        super().__init__(message)
        self.type = type


def json_depth(value: Any, limit: int | None = None) -> int:
    """How deeply arrays and objects nest in `value` (a scalar: 0); iterative, so any depth
    is measured; stops early once `limit` is exceeded (the answer is then `limit + 1`)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list | tuple | set | frozenset):
            children = item
        else:
            continue
        depth += 1
        if depth > deepest:
            deepest = depth
            if limit is not None and depth > limit:
                return depth
        stack.extend((child, depth) for child in children)
    return deepest


def check_payload(
    value: Any,
    what: str,
    *,
    max_bytes: int = MAX_PAYLOAD_BYTES,
    max_depth: int = MAX_DEPTH,
) -> int:
    """Refuse (`PayloadRefused`) a value nested deeper than `max_depth` or whose JSON is
    larger than `max_bytes`; return its size in bytes. `what` names it in the message ("the
    output"). A value JSON cannot hold raises `TypeError`, as `dumps` does."""
    if json_depth(value, max_depth) > max_depth:
        raise PayloadRefused(
            "PayloadTooDeep", f"{what} is nested more than {max_depth} levels deep"
        )
    size = len(dumps(value).encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise PayloadRefused(
            "PayloadTooLarge", f"{what} is {size} bytes of JSON, over the cap of {max_bytes}"
        )
    return size


def shallow(value: Any, max_depth: int = MAX_DEPTH) -> Any:
    """`value` as it may be shown: itself when it nests at most `max_depth` levels (every
    value stored since the caps), else a copy whose lists and maps at that depth are the
    marker `TOO_DEEP` (a value written before the caps: an encoder would refuse it whole,
    and a reader that fails on one value fails on the whole execution)."""
    if json_depth(value, max_depth) <= max_depth:
        return value
    return _cut(value, max_depth)


def _cut(value: Any, levels: int) -> Any:
    if not isinstance(value, dict | list | tuple):
        return value
    if levels <= 0:
        return dict(TOO_DEEP)
    if isinstance(value, dict):
        return {k: _cut(v, levels - 1) for k, v in value.items()}
    return [_cut(v, levels - 1) for v in value]


def _finite(value: Any) -> Any:
    """`value` with NaN and infinities as None, as orjson writes them (the rare path only)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    raise TypeError(f"cannot store a value of type {type(value).__name__} as JSON")


def to_micros(value: datetime) -> int:
    delta = value - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_micros(value: int) -> datetime:
    return _EPOCH + timedelta(microseconds=value)
