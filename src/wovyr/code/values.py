"""What crosses between a workflow function and its steps: its values as a step's (JSON
checked: a value that is not JSON is a `TypeError` naming the argument; data kept data: a
string holding `${{` is wrapped so it is never rendered as an expression; a `Secret` left as
the reference an attempt resolves), the errors a replay raises into the function or
records (`StepFailed`, `NonDeterminism`, an exception with its traceback), and the line of
the function a call was made from."""

from __future__ import annotations

import json
import re
import sys
import traceback
from collections.abc import Callable, Mapping
from datetime import timedelta
from pathlib import Path
from types import FrameType
from typing import Any

from wovyr.errors import WovyrError

__all__ = [
    "NonDeterminism",
    "Secret",
    "StepFailed",
    "as_duration",
    "as_json",
    "caller_line",
    "error",
    "literal",
    "raised_error",
    "slug",
    "tool_name",
    "unliteral",
]


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


def slug(name: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9_]", "_", name)[:40].strip("_") or "step"
    return slug if slug[0].isalpha() else f"s_{slug}"


def tool_name(activity: Callable[..., Any] | str) -> str:
    if isinstance(activity, str):
        return activity
    name = getattr(activity, "__wovyr_activity__", None)
    if not isinstance(name, str):
        raise TypeError(
            f"{getattr(activity, '__qualname__', activity)!r} is not a registered activity: "
            "decorate it with @wovyr.activity(NAME), or pass the activity's name"
        )
    return name


class StepFailed(WovyrError):
    """A step of a code workflow failed for good (its retries are exhausted): raised where
    the function awaits it. `error` is the step's recorded error (`type`, `message`)."""

    def __init__(self, step: str, error: Mapping[str, Any]) -> None:
        self.step = step
        self.error = dict(error)
        self.type = str(self.error.get("type", "Error"))
        super().__init__(f"step {step} failed: {self.type}: {self.error.get('message', '')}")


class NonDeterminism(WovyrError):
    """A replay asked for another step than the history holds: the function changed (or
    reads something it must not). The execution fails with it even if the function
    catches it."""


def caller_line() -> str:
    """`file.py:LINE` of the workflow code that made the current call (the first frame
    outside this package and asyncio)."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        shown = _FILES.get(frame.f_code.co_filename)
        if shown is None:
            shown = _FILES[frame.f_code.co_filename] = _shown_file(frame.f_code.co_filename)
        if shown:
            return f"{shown}:{frame.f_lineno}"
        frame = frame.f_back
    return "?"


def _shown_file(filename: str) -> str:
    """How a frame's file is shown ("" for this package's and asyncio's own frames)."""
    path = Path(filename)
    return "" if path.parent == _HERE or "asyncio" in path.parts else path.name


_HERE = Path(__file__).parent
_FILES: dict[str, str] = {}  # a frame's file name -> `_shown_file` (once per file)


def raised_error(exc: BaseException) -> dict[str, Any]:
    """The recorded error of an exception the function raised, with its traceback."""
    trace = "".join(traceback.format_exception(exc)[-20:])
    if isinstance(exc, StepFailed):  # as a YAML workflow fails when a step failed for good
        return {
            "type": "ActivityFailed",
            "activity": exc.step,
            "error": exc.error,
            "details": {"traceback": trace},
        }
    return error(type(exc).__name__, str(exc), traceback=trace)
