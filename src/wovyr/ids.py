"""Identifiers: time-sortable execution ids (UUID version 7) and derived child ids."""

from __future__ import annotations

import os
import re
import uuid
from datetime import datetime

__all__ = ["child_id", "new_id", "validate_execution_id"]

_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:\-]{0,199}$")


def new_id(now: datetime) -> str:
    """A UUIDv7 string whose leading 48 bits are `now` in milliseconds, so ids sort by time."""
    ms = int(now.timestamp() * 1000) & ((1 << 48) - 1)
    rand = int.from_bytes(os.urandom(10), "big")
    value = (ms << 80) | (0x7 << 76) | ((rand >> 68) & 0xFFF) << 64
    value |= (0b10 << 62) | (rand & ((1 << 62) - 1))
    return str(uuid.UUID(int=value))


def child_id(parent: str, activity: str, index: int | None = None) -> str:
    """The id of the child workflow started by `activity` of `parent` (and item `index`)."""
    base = f"{parent}::{activity}"
    return base if index is None else f"{base}[{index}]"


def validate_execution_id(value: str) -> str:
    """Return `value` if it is an acceptable caller-chosen execution id, else raise ValueError."""
    if not _ID_RE.match(value):
        raise ValueError(
            "execution ids are 1-200 characters of letters, digits, '.', '_', ':' and '-', "
            "starting with a letter or digit"
        )
    return value
