"""The traceback a failed attempt keeps: the handler's own frames, capped in size.

A handler's exception travels through Wovyr's frames (the runner, the kind's executor,
`call_handler`) and the event loop's or thread pool's before it is caught; only the frames
from the first one outside those on are the user's story. The text is
`traceback.format_exception` of the exception from that frame (chained causes included),
at most the innermost `MAX_TRACEBACK_FRAMES` frames of each and `MAX_TRACEBACK_CHARS`
characters in all. Local variables are never included: only what a default Python
traceback prints (file, line, function, source line, the exception's type and message).

The traceback is stored as `error["traceback"]` of the attempt's failure event (the error is
free-form JSON: `type`, `message`, `details`), so it also travels inside the execution's
error and the API's answers; the CLI and the UI print it as text (`tracebacks_in`) next to
the error shown without it (`without_tracebacks`).
"""

from __future__ import annotations

import concurrent.futures
import threading
import traceback
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

__all__ = [
    "MAX_TRACEBACK_CHARS",
    "MAX_TRACEBACK_FRAMES",
    "handler_traceback",
    "tracebacks_in",
    "without_tracebacks",
]

MAX_TRACEBACK_FRAMES = 20
MAX_TRACEBACK_CHARS = 8_000
_HEAD_CHARS = 2_000  # kept from the start of a long traceback; the rest from its end

_PACKAGE = str(Path(__file__).resolve().parents[1])  # .../wovyr
_MACHINERY = (
    _PACKAGE,
    str(Path(threading.__file__).resolve().parent / "asyncio"),  # not imported for this
    str(Path(concurrent.futures.__file__).resolve().parent),
    str(Path(threading.__file__).resolve()),
)


def _ours(tb: TracebackType) -> bool:
    filename = tb.tb_frame.f_code.co_filename
    return filename.startswith(_MACHINERY)


def handler_traceback(exc: BaseException) -> str | None:
    """The traceback of `exc` from the handler's first frame on; None when no frame of it is
    outside Wovyr and the event loop's machinery (nothing of the user's ran)."""
    tb = exc.__traceback__
    while tb is not None and _ours(tb):
        tb = tb.tb_next
    if tb is None:
        return None
    lines = traceback.format_exception(type(exc), exc, tb, limit=-MAX_TRACEBACK_FRAMES)
    return _capped("".join(lines))


def _capped(text: str) -> str:
    if len(text) <= MAX_TRACEBACK_CHARS:
        return text
    marker = "\n  ... ({cut:,} characters cut) ...\n"
    room = MAX_TRACEBACK_CHARS - len(marker.format(cut=len(text)))
    head, tail = text[:_HEAD_CHARS], text[len(text) - (room - _HEAD_CHARS) :]
    return head + marker.format(cut=len(text) - len(head) - len(tail)) + tail


def without_tracebacks(value: Any) -> Any:
    """`value` (an error, or what holds errors) with every `traceback` key left out."""
    if isinstance(value, Mapping):
        return {k: without_tracebacks(v) for k, v in value.items() if k != "traceback"}
    if isinstance(value, list):
        return [without_tracebacks(v) for v in value]
    return value


def tracebacks_in(errors: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The tracebacks in `errors` (where -> error, e.g. activity id -> its error), also those
    of errors nested under `error` (an execution's failure holds its activity's); each text
    once, as (where, text), under the first place it is found."""
    found: dict[str, str] = {}
    for where, outer in errors.items():
        error, nested = outer, 0
        while isinstance(error, Mapping) and nested < 8:
            trace = error.get("traceback")
            if isinstance(trace, str) and trace not in found:
                found[trace] = where
            error, nested = error.get("error"), nested + 1
    return [(where, trace) for trace, where in found.items()]
