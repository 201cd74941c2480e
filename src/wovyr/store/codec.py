"""Encoding shared by the SQL stores: JSON text and integer-microsecond UTC times."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

__all__ = ["dumps", "from_micros", "loads", "to_micros"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=_default)


def loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


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
