"""Logs of activity attempts, and the ids on every log line.

- `AttemptLog` (`ctx.log` in a handler): the lines one attempt keeps, size-capped. What a
  handler writes through it is kept at every level; what the standard `logging` of the
  handler's own module emits while the attempt runs is kept too (at the level logging lets
  through: the logger's effective level). The worker scrubs resolved secret values from
  them and records them with the attempt's result event (`logs`), so they are read back
  with the history, never from a separate file.
- `attempt_ids` / `bind`: the execution, activity and attempt the code running now works
  for (a context variable: it follows tasks and `asyncio.to_thread`), which `JsonLines`
  writes on every line (`WOVYR_LOG_FORMAT=json`).
- Secret values never reach a process's log through the code of an attempt: every log
  record made while an attempt is bound has the attempt's secret forms masked when it is
  made (its message, traceback and stack), before any handler (text, JSON, a handler's own)
  sees it; and in a long-running process (`route_output`) what an attempt's code prints to
  `sys.stdout` or `sys.stderr` goes, line by line, into that attempt's log only (scrubbed
  with the rest), not into the process's output.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TextIO

from wovyr.activities.redact import MASK
from wovyr.traces import current_ids

__all__ = [
    "MAX_LINES",
    "MAX_LINE_CHARS",
    "MAX_LOG_CHARS",
    "AccessFields",
    "AttemptLog",
    "Bound",
    "JsonLines",
    "attempt_ids",
    "bind",
    "capture",
    "log_config",
    "route_output",
]

MAX_LINES = 200  # lines one attempt keeps (later ones are counted, not kept)
MAX_LINE_CHARS = 2_000  # a longer message is cut
MAX_LOG_CHARS = 32_000  # all lines of one attempt together
_OUTPUT_LEVELS = {"stdout": "info", "stderr": "warning"}  # printed lines, as log lines
_MAX_PARTIAL = 4 * MAX_LINE_CHARS  # printed characters held for the rest of their line


@dataclass
class AttemptLog:
    """The log lines of one attempt: `ctx.log.info("charged %s", amount)`."""

    lines: list[dict[str, Any]] = field(default_factory=list)
    dropped: int = 0
    # the attempt's secret forms (its own list: filled when its secrets are resolved),
    # masked in a line before it is cut to its cap, so no cut keeps part of a value
    forms: Sequence[str] = field(default=(), repr=False)
    _chars: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _partial: dict[str, str] = field(default_factory=dict, repr=False)  # printed, no newline yet

    def write(self, stream: str, text: str) -> None:
        """What the attempt's code printed to `stream` (`stdout`, `stderr`): each whole line
        kept as a line of that logger (a line is kept whole, so a value printed in pieces
        is masked like one printed at once; past `_MAX_PARTIAL` characters without a
        newline, what was printed is kept as a line)."""
        with self._lock:
            text = self._partial.pop(stream, "") + text
            *whole, rest = text.split("\n")
            if len(rest) > _MAX_PARTIAL:
                whole.append(rest)
            elif rest:
                self._partial[stream] = rest
        for line in whole:
            self.add(_OUTPUT_LEVELS[stream], line, stream)

    def add(self, level: str, message: str, logger: str = "ctx", at: float | None = None) -> None:
        """Keep one line (or count it as dropped past the caps)."""
        message = _masked(message, self.forms)
        text = message if len(message) <= MAX_LINE_CHARS else message[:MAX_LINE_CHARS] + "…"
        when = datetime.fromtimestamp(time.time() if at is None else at, UTC)
        with self._lock:
            if len(self.lines) >= MAX_LINES or self._chars + len(text) > MAX_LOG_CHARS:
                self.dropped += 1
                return
            self._chars += len(text)
            self.lines.append(
                {"at": when.isoformat(), "level": level, "logger": logger, "message": text}
            )

    def _log(self, level: str, message: object, args: tuple[Any, ...]) -> None:
        text = str(message)
        if args:
            try:
                text = text % args
            except (TypeError, ValueError):
                text = " ".join([text, *map(str, args)])
        self.add(level, text)

    def debug(self, message: object, *args: Any) -> None:
        self._log("debug", message, args)

    def info(self, message: object, *args: Any) -> None:
        self._log("info", message, args)

    def warning(self, message: object, *args: Any) -> None:
        self._log("warning", message, args)

    def error(self, message: object, *args: Any) -> None:
        self._log("error", message, args)

    def __call__(self, message: object, *args: Any) -> None:
        """`ctx.log("text")`: an info line."""
        self._log("info", message, args)

    def kept(self) -> list[dict[str, Any]]:
        """The lines to record: those kept (a last printed line without a newline too), and
        a last one saying how many were dropped."""
        with self._lock:
            partial, self._partial = self._partial, {}
        for stream, line in partial.items():
            self.add(_OUTPUT_LEVELS[stream], line, stream)
        with self._lock:
            out = list(self.lines)
            if self.dropped:
                out.append(
                    {
                        "at": out[-1]["at"] if out else datetime.now(UTC).isoformat(),
                        "level": "warning",
                        "logger": "wovyr",
                        "message": f"{self.dropped} more log lines dropped (the cap is "
                        f"{MAX_LINES} lines, {MAX_LOG_CHARS} characters per attempt)",
                    }
                )
        return out


# --- which attempt the running code works for ------------------------------------------


@dataclass(frozen=True)
class Bound:
    """The ids the code running now works for, and the secret values it must not show."""

    execution_id: str | None = None
    activity_id: str | None = None
    attempt: int | None = None
    tenant: str | None = None
    forms: Sequence[str] = ()  # (the attempt's own list: secrets resolved later show up)
    log: AttemptLog | None = None  # where this attempt's lines go
    modules: tuple[str, ...] = ()  # loggers (and their children) kept in `log`


_BOUND: contextvars.ContextVar[Bound | None] = contextvars.ContextVar("wovyr_log_ids", default=None)


def attempt_ids() -> Bound | None:
    """The ids bound in this task or thread (None outside any execution)."""
    return _BOUND.get()


@contextlib.contextmanager
def bind(**changes: Any) -> Iterator[Bound]:
    """Bind ids (over those bound already) for the code run inside."""
    _install_masking()
    current = _BOUND.get() or Bound()
    bound = Bound(**{**current.__dict__, **changes})
    token = _BOUND.set(bound)
    try:
        yield bound
    finally:
        _BOUND.reset(token)


class _Capture(logging.Handler):
    """Copies records of the bound attempt's modules into its `AttemptLog`."""

    def emit(self, record: logging.LogRecord) -> None:
        bound = _BOUND.get()
        if bound is None or bound.log is None or not bound.modules:
            return
        name = record.name
        if not any(name == m or name.startswith(m + ".") for m in bound.modules):
            return
        try:
            message = record.getMessage()
        except Exception:  # a bad format string is the handler's bug, not ours
            message = str(record.msg)
        if record.exc_text:  # formatted (and masked) when the record was made
            message += "\n" + record.exc_text
        elif record.exc_info and record.exc_info[0] is not None:
            message += "\n" + _FORMATTER.formatException(record.exc_info)
        bound.log.add(record.levelname.lower(), message, name, record.created)


_CAPTURE = _Capture()
_INSTALLED = threading.Lock()


@contextlib.contextmanager
def capture(module: str) -> Iterator[None]:
    """While inside, records of logger `module` (and its children) emitted in this context
    go to the bound attempt's log too (the handler is installed on the root logger once)."""
    root = logging.getLogger()
    with _INSTALLED:
        if _CAPTURE not in root.handlers:
            root.addHandler(_CAPTURE)
    bound = _BOUND.get()
    if bound is None or bound.log is None:
        yield
        return
    with bind(modules=(*bound.modules, module)):
        yield


# --- secret values kept out of the process's log ---------------------------------------

_FORMATTER = logging.Formatter()
_MASKING: list[Callable[..., logging.LogRecord]] = []  # the factory installed, once


def _masked(text: str, forms: Iterable[str]) -> str:
    for form in forms:
        if form in text:
            text = text.replace(form, MASK)
    return text


def _mask_record(record: logging.LogRecord, forms: Sequence[str]) -> None:
    """`record` with `forms` masked in what any handler shows of it: the message (formatted
    now, its arguments dropped), the traceback (formatted now, as `exc_text`), the stack."""
    try:
        message = record.getMessage()
    except Exception:  # a bad format string: the message as written, never its arguments
        message = str(record.msg)
    record.msg, record.args = _masked(message, forms), ()
    if record.exc_info and record.exc_info[0] is not None:
        record.exc_text = _masked(_FORMATTER.formatException(record.exc_info), forms)
    if record.stack_info:
        record.stack_info = _masked(record.stack_info, forms)


def _install_masking() -> None:
    """Wrap the process's log record factory once: a record made while an attempt with
    secret values is bound is masked before any handler or filter sees it."""
    if _MASKING:
        return
    with _INSTALLED:
        if _MASKING:
            return
        previous = logging.getLogRecordFactory()

        def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = previous(*args, **kwargs)
            bound = _BOUND.get()
            if bound is not None and bound.forms:
                _mask_record(record, bound.forms)
            return record

        logging.setLogRecordFactory(factory)
        _MASKING.append(factory)


class _AttemptOutput:
    """`sys.stdout` or `sys.stderr` of a long-running process: what the code of a bound
    attempt writes goes to that attempt's log; anything else to the process's stream."""

    def __init__(self, stream: TextIO, name: str) -> None:
        self._stream = stream
        self._name = name

    def write(self, text: str) -> int:
        bound = _BOUND.get()
        if bound is None or bound.log is None:
            return self._stream.write(text)
        bound.log.write(self._name, str(text))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self._stream.flush()

    def __getattr__(self, name: str) -> Any:  # fileno, isatty, encoding, buffer, ...
        return getattr(self._stream, name)


def route_output() -> None:
    """Send what attempts print into their own logs (see `_AttemptOutput`), for a process
    whose output is a log (a worker, a server). Call it after logging is configured: a log
    handler that looks `sys.stderr` up later would write through it."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if not isinstance(stream, _AttemptOutput):
            setattr(sys, name, _AttemptOutput(stream, name))


# --- JSON lines --------------------------------------------------------------------------


def _rfc3339_ms(created: float) -> str:
    """A log record's time in RFC 3339, UTC, to the millisecond: 2026-12-04T18:32:37.123Z."""
    at = datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds")
    return at.removesuffix("+00:00") + "Z"


class JsonLines(logging.Formatter):
    """Log records as JSON objects, one per line: `at` in RFC 3339 to the millisecond, the
    bound execution, activity and attempt ids on every line (null outside one), and
    `trace_id` and `span_id` on the lines of a traced attempt (tracing on); an attempt's
    secret values were masked when the record was made (`_install_masking`)."""

    def format(self, record: logging.LogRecord) -> str:
        bound = _BOUND.get() or Bound()
        line: dict[str, Any] = {
            "at": _rfc3339_ms(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            "tenant": bound.tenant,
            "execution_id": bound.execution_id,
            "activity_id": bound.activity_id,
            "attempt": bound.attempt,
        }
        ids = current_ids()
        if ids is not None:
            line["trace_id"], line["span_id"] = ids
        extra = getattr(record, "fields", None)  # structured fields: the banner, access lines
        if isinstance(extra, dict):
            line.update((k, v) for k, v in extra.items() if k not in line)
        if record.exc_info:
            line["error"] = record.exc_text or self.formatException(record.exc_info)
        return json.dumps(line, default=str, ensure_ascii=False)


class AccessFields(logging.Filter):
    """uvicorn's access lines (`client - "METHOD path HTTP/v" status`) with their parts as
    fields of the JSON line: `client`, `method`, `path` (without its query string, which
    may carry what a caller would not want logged) and `status`."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) == 5:
            client, method, target, _, status = args
            path = str(target).split("?", 1)[0]
            record.fields = {"client": client, "method": method, "path": path, "status": status}
            record.msg, record.args = "%s %s %s", (method, path, status)
        return True


def log_config(json_lines: bool, level: str = "info") -> dict[str, Any]:
    """A `logging.config.dictConfig` for a long-running process (server, worker): JSON
    lines (`JsonLines`) or text, on stderr, at `level` for Wovyr and uvicorn."""
    formatter: dict[str, Any] = (
        {"()": JsonLines}
        if json_lines
        else {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}
    )
    handler = {"handlers": ["out"], "level": level.upper(), "propagate": False}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"out": formatter},
        "handlers": {
            "out": {
                "class": "logging.StreamHandler",
                "formatter": "out",
                "stream": "ext://sys.stderr",
            }
        },
        "filters": {"access": {"()": AccessFields}},
        "loggers": {
            **dict.fromkeys(("uvicorn", "wovyr"), handler),
            "uvicorn.access": {**handler, "filters": ["access"]},
        },
        "root": {"handlers": ["out"], "level": "WARNING"},
    }
