"""Encoding shared by the stores: JSON text and integer-microsecond UTC times.

orjson does the common case (several times faster than the standard library, and this sits
on every step's path); values it refuses (integers beyond 64 bits, nesting deeper than 254,
strings with lone surrogates) go through the standard library, which stores them or raises
the same clear `TypeError` as before. JSON has no NaN or infinity: such floats are stored as
null.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

__all__ = ["dumps", "from_micros", "loads", "to_micros"]

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


def loads(text: str | bytes | None) -> Any:
    if text is None:
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:  # e.g. NaN written by an earlier version
        return json.loads(text)


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
