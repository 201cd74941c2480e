"""How a workflow function's values become a step's definition values: JSON checked (a
value that is not JSON is a `TypeError` naming the argument), data kept data (a string
holding `${{` is wrapped so it is never rendered as an expression), a `Secret` left as the
reference an attempt resolves."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

__all__ = ["Secret", "as_duration", "as_json", "error", "literal", "unliteral"]


def as_json(values: dict[str, Any], what: str) -> dict[str, Any]:
    """`values` as JSON, or TypeError naming the argument and its type."""
    try:
        out: dict[str, Any] = json.loads(json.dumps(values))
    except (TypeError, ValueError):
        for key, value in values.items():
            try:
                json.dumps(value)
            except (TypeError, ValueError):
                raise TypeError(
                    f"argument {key!r} of {what} is a {type(value).__name__}, which is not "
                    "JSON: a step's arguments are recorded in its history"
                ) from None
        raise
    return out


def as_duration(value: float | str | timedelta) -> float | str:
    if isinstance(value, timedelta):
        return value.total_seconds()
    return value


class Secret(str):
    """A tenant secret named in a step's arguments (`ctx.secret("NAME")`): the attempt gets
    its value; the function, the history and the checkpoint only its name."""

    __slots__ = ()


def literal(value: Any) -> Any:
    """`value` as a definition value that renders to itself: a string holding `${{` becomes
    an expression whose value is that string (data never renders as an expression); a
    `Secret` becomes the reference an attempt resolves (`${{ secrets.NAME }}`)."""
    if isinstance(value, Secret):
        return str(value)
    if isinstance(value, str):
        if "${{" not in value:
            return value
        escaped = "".join(
            f"\\x{ord(ch):02x}" if ch in '{}$"\\' or ord(ch) < 32 else ch for ch in value
        )
        return '${{ "' + escaped + '" }}'
    if isinstance(value, dict):
        return {k: literal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [literal(v) for v in value]
    return value


def unliteral(value: Any) -> Any:
    """What `literal(x)` renders to: `x`."""
    if isinstance(value, str) and value.startswith('${{ "') and value.endswith('" }}'):
        return re.sub(r"\\x([0-9a-f]{2})", lambda m: chr(int(m[1], 16)), value[5:-4])
    if isinstance(value, dict):
        return {k: unliteral(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unliteral(v) for v in value]
    return value


def error(kind: str, message: str, **details: Any) -> dict[str, Any]:
    err: dict[str, Any] = {"type": kind, "message": message}
    if details:
        err["details"] = details
    return err
