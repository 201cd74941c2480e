"""The traceback a failed attempt keeps: the tool handler's own frames, capped in size.

The traceback is stored with the attempt's failure, where the tenant reads it (the API, the
UI, the CLI over `--server`, the event log), so it tells the story of the handler's own
code and nothing of the host's: the frames of the handler's own files only (its module, or
the whole top-level package it belongs to), never those of Wovyr, the standard library or
another installed package it called into; of the exceptions chained to the one raised, only
those raised in the handler's own code (a cause raised inside a library - a DNS lookup, a
driver - is left out with its message). A failure that did not come through a tool handler
(a built-in kind's, Wovyr's own, a handler that is part of Wovyr) keeps no traceback: its
`type` and `message` are the error. The operator's log has every failure whole (the
worker logs it with its full traceback).

The text is what `traceback.format_exception` prints of the exception with those frames,
at most the innermost `MAX_TRACEBACK_FRAMES` frames of each exception and
`MAX_TRACEBACK_CHARS` characters in all. Local variables are never included: only what a
default Python traceback prints (file, line, function, source line, the exception's type
and message).

It is stored as `error["traceback"]` of the attempt's failure event (the error is
free-form JSON: `type`, `message`, `details`), so it also travels inside the execution's
error and the API's answers; the CLI and the UI print it as text (`tracebacks_in`) next to
the error shown without it (`without_tracebacks`).
"""

from __future__ import annotations

import concurrent.futures
import os
import sys
import threading
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from types import FrameType, TracebackType
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
    """The traceback of `exc` a tenant may see (see the module's docstring); None when it
    did not come out of a tool handler's own code."""
    tb = exc.__traceback__
    # (imported here: showing an execution's tracebacks needs no handler machinery)
    from wovyr.activities.base import call_handler

    called = call_handler.__code__  # the frame a tool handler is called from
    while tb is not None and tb.tb_frame.f_code is not called:
        tb = tb.tb_next
    while tb is not None and _ours(tb):
        tb = tb.tb_next
    if tb is None:
        return None  # raised before the handler ran, or not through one
    own = _own_files(tb.tb_frame)
    if own is None:
        return None
    shown = traceback.TracebackException(type(exc), exc, tb, compact=True)
    _keep_own(shown, own, raised=True)
    return _capped("".join(shown.format()))


def _own_files(frame: FrameType) -> Callable[[str], bool] | None:
    """Whether a file is the handler's own: inside the top-level package of the module that
    `frame` (the handler's) runs in, or that module's file; None for a handler of Wovyr."""
    module = sys.modules.get(str(frame.f_globals.get("__name__") or "").partition(".")[0])
    paths = getattr(module, "__path__", None)
    if paths is not None:  # a package: every file under its folders
        roots = tuple(os.path.realpath(p) + os.sep for p in paths)
    else:
        roots = (os.path.realpath(frame.f_code.co_filename),)
    if any(root.startswith(_PACKAGE + os.sep) for root in roots):
        return None

    def own(filename: str) -> bool:
        path = os.path.realpath(filename)
        return any(path == root or path.startswith(root) for root in roots)

    return own


def _keep_own(
    shown: traceback.TracebackException, own: Callable[[str], bool], *, raised: bool = False
) -> bool:
    """Leave in `shown` the frames of `own` files (the innermost `MAX_TRACEBACK_FRAMES`), and
    of its chain the exceptions raised in them; False when `shown` was not (`raised`: it is
    the exception the attempt failed with, kept whatever raised it)."""
    frames = list(shown.stack)
    if not raised and not (frames and own(frames[-1].filename)):
        return False
    kept = [f for f in frames if own(f.filename)][-MAX_TRACEBACK_FRAMES:]
    shown.stack = traceback.StackSummary.from_list(kept)
    for link in ("__cause__", "__context__"):
        linked = getattr(shown, link)
        while linked is not None and not _keep_own(linked, own):
            linked = linked.__cause__ or linked.__context__
        setattr(shown, link, linked)
    if shown.exceptions:  # an exception group's members
        shown.exceptions = [e for e in shown.exceptions if _keep_own(e, own)]
    return True


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
