"""Field types of the workflow language, shared by the model (`wovyr.definition`) and the
activity kinds (`wovyr.activities`): durations (`500ms`, `30s`, `5m`, `2h`, `30d`, `1h30m`,
ISO 8601 `P1DT2H`), timestamps, version labels, name patterns and the frozen model base."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, WithJsonSchema

__all__ = [
    "IDENT_PATTERN",
    "NAME_PATTERN",
    "Duration",
    "FrozenModel",
    "Timestamp",
    "Version",
    "format_duration",
    "parse_duration",
    "parse_timestamp",
]

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_SIMPLE = re.compile(r"^(?:(\d+(?:\.\d+)?)(ms|s|m|h|d|w))+$")
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_ISO = re.compile(
    r"^P(?:(?P<w>\d+(?:\.\d+)?)W)?(?:(?P<d>\d+(?:\.\d+)?)D)?"
    r"(?:T(?:(?P<h>\d+(?:\.\d+)?)H)?(?:(?P<m>\d+(?:\.\d+)?)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?$"
)
MAX_SECONDS = 100 * 365 * 86400.0


def parse_duration(value: object) -> float:
    """Seconds in `value`; raise ValueError with a hint when it is not a duration."""
    if isinstance(value, bool):
        raise ValueError("a duration must be a string such as '30s' or a number of seconds")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        seconds = _parse_text(value.strip())
    else:
        raise ValueError("a duration must be a string such as '30s' or a number of seconds")
    if seconds < 0 or math.isnan(seconds):
        raise ValueError("a duration cannot be negative")
    if seconds > MAX_SECONDS:
        raise ValueError("a duration cannot exceed 100 years")
    return seconds


def _parse_text(text: str) -> float:
    if _SIMPLE.match(text):
        return sum(float(n) * _UNITS[u] for n, u in _PART.findall(text))
    iso = _ISO.match(text.upper())
    if iso and text.upper() not in ("P", "PT") and not text.upper().endswith("T"):
        parts = {k: float(v) for k, v in iso.groupdict().items() if v}
        return (
            parts.get("w", 0) * 604800
            + parts.get("d", 0) * 86400
            + parts.get("h", 0) * 3600
            + parts.get("m", 0) * 60
            + parts.get("s", 0)
        )
    raise ValueError(
        f"invalid duration {text!r}; use a number with a unit (500ms, 30s, 5m, 2h, 30d, 1h30m) "
        "or ISO 8601 (P1DT2H)"
    )


def format_duration(seconds: float) -> str:
    """A short human form: 90 -> '1m30s'."""
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    out = []
    rest = round(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if rest >= size:
            out.append(f"{rest // size}{unit}")
            rest %= size
    return "".join(out) or "0s"


def parse_timestamp(value: object) -> datetime:
    """An aware UTC datetime from an RFC 3339 / ISO 8601 string (or a datetime)."""
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, str):
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            dt = datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(
                f"invalid timestamp {value!r}; use RFC 3339 such as 2027-01-01T09:00:00Z"
            ) from None
    else:
        raise ValueError("a timestamp must be a string such as 2027-01-01T09:00:00Z")
    if dt.tzinfo is None:
        raise ValueError(f"timestamp {value!r} has no time zone; add Z or an offset like +01:00")
    return dt.astimezone(UTC)


IDENT_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._\-]{0,127}$"

_DURATION_SCHEMA = {
    "anyOf": [
        {
            "type": "string",
            "pattern": r"^((\d+(\.\d+)?)(ms|s|m|h|d|w))+$|^P.*$",
            "description": "500ms, 30s, 5m, 2h, 30d, 1h30m or ISO 8601 (P1DT2H)",
        },
        {"type": "number", "minimum": 0, "description": "seconds"},
    ]
}
Duration = Annotated[float, BeforeValidator(parse_duration), WithJsonSchema(_DURATION_SCHEMA)]
Timestamp = Annotated[
    datetime,
    BeforeValidator(parse_timestamp),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]
Version = Annotated[
    str,
    BeforeValidator(
        lambda v: str(v) if isinstance(v, int | float) and not isinstance(v, bool) else v
    ),
    WithJsonSchema({"type": ["string", "integer"]}),
]


class FrozenModel(BaseModel):
    """The base of every model of the workflow language: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
