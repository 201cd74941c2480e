"""The one exception tree of Wovyr.

::

    WovyrError
    ├── DefinitionError            a workflow document is invalid (carries every problem)
    ├── ExpressionError            an expression failed to compile or evaluate
    ├── InputError                 workflow inputs do not match the declared inputs
    ├── NotFound                   no such execution / definition / activity (same for any tenant)
    │   └── SecretMissing, ProviderMissing, McpServerMissing   (in `wovyr.platform.*`)
    ├── Conflict                   the request contradicts the current state
    │   ├── ExecutionFinished      the execution already completed, failed or was cancelled
    │   ├── DefinitionConflict     a different definition already uses that name and version
    │   └── DefinitionDrift        the definition sent is not the one the execution is pinned to
    ├── QuotaExceeded              the tenant's quota is used up (with when to try again)
    ├── ActivityNotRegistered      a `tool` names a handler nobody registered
    ├── StepFailed, NonDeterminism, CodeNotLoaded   a code workflow's step failed, its replay
    │                              diverged from its history, its function is not loaded here;
    │                              ReplayLoopError: it awaited a clock or I/O (`wovyr.code`)
    ├── ActivityError              an activity attempt failed (`wovyr.activities.base`)
    │   └── NonRetryableError      ... and is not tried again
    ├── InvalidToolArguments       a model's tool arguments do not fit the tool (a ValueError
    │                              too; `wovyr.activities.tool_schema`)
    ├── StoreError                 the store failed (driver errors are translated into this)
    │   ├── LeaseLost              our lease was taken over: commit nothing
    │   └── StoreUnavailable       the database could not be reached
    ├── PayloadRefused             a value over the store's size or depth caps (`wovyr.store.codec`)
    ├── NotSealed                  a `{"$sealed": ...}` value no sealer wrote (a ValueError too;
    │                              `wovyr.store.sealing`)
    ├── ConfigError                bad settings, flags or URLs
    ├── KmsError                   a key or a sealed value could not be used (never shows one)
    │   ├── PayloadKeyShredded     the data key of a sealed value was shredded
    │   └── PayloadUndecryptable   a sealed value does not decrypt (both `wovyr.store.sealing`)
    ├── RemoteError                a Wovyr server refused or failed a request (`wovyr.client`)
    │   ├── RequestInvalid         400, 413, 415, 422: the request is invalid (with problems)
    │   ├── AccessDenied           401, 403: no key, a revoked key, or not the role for it
    │   ├── ServerError            500 and other answers the client does not expect
    │   └── ServerUnreachable      no answer: connection refused, timed out, bad URL
    ├── BackupRefused              a backup is damaged, incomplete or from a newer Wovyr
    ├── ApiProblem, FormError, KeyRefused   the server's answers to a request, a UI form,
    │                              an MCP caller (`wovyr.server`)
    └── CalendarRangeError         a time or schedule tick beyond years 1-9999 (a ValueError too)

Classes named with their module are defined there, beside the code that raises them (their
module is part of how tracebacks and logs name them), and are importable from there only.
Two kinds of exception stay outside the tree on purpose: the request guard's `BodyTooLarge`
and `BadJson` (`wovyr.server.guard`) are Starlette `HTTPException`s, raised while a body is
read so that the framework answers them (a handler's `except WovyrError` must not take a
413 for a form error); and private signals (`_Stop`, `_Rollback`, ...) that one module raises
and catches to unwind, which never leave it. `wovyr.activities.launcher` imports nothing of
Wovyr (it runs as `python -I -S`).

A server's 404, 409, 429 and 503 arrive in the client as `NotFound`, `Conflict`,
`QuotaExceeded` and `StoreUnavailable`: code that catches them works the same against the
engine in-process and against a server.

Each class's docstring is its default message. User-facing errors carry a location and a
hint where one exists, so edges (CLI, HTTP) can print them without a traceback.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "AccessDenied",
    "ActivityNotRegistered",
    "BackupRefused",
    "CalendarRangeError",
    "ConfigError",
    "Conflict",
    "DefinitionConflict",
    "DefinitionDrift",
    "DefinitionError",
    "ExecutionFinished",
    "ExpressionError",
    "InputError",
    "KmsError",
    "LeaseLost",
    "NotFound",
    "Problem",
    "QuotaExceeded",
    "RemoteError",
    "RequestInvalid",
    "ServerError",
    "ServerUnreachable",
    "StoreError",
    "StoreUnavailable",
    "WovyrError",
]


@dataclass(frozen=True)
class Problem:
    """One located problem in a document or request."""

    message: str
    path: str = ""
    file: str = ""
    line: int | None = None
    column: int | None = None
    hint: str | None = None

    def location(self) -> str:
        parts = [self.file or "<input>"]
        if self.line is not None:
            parts.append(str(self.line))
            parts.append(str(self.column or 1))
        return ":".join(parts)

    def format(self) -> str:
        text = f"{self.location()}: {self.message}"
        if self.path:
            text += f" (at {self.path})"
        if self.hint:
            text += f"; {self.hint}"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "path": self.path,
            "message": self.message,
            "hint": self.hint,
        }


class WovyrError(Exception):
    """Wovyr failed."""

    def __init__(self, message: str | None = None, *, hint: str | None = None) -> None:
        self.message = message or (self.__doc__ or type(self).__name__).strip()
        self.hint = hint
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message} ({self.hint})"


class DefinitionError(WovyrError):
    """The workflow definition is invalid."""

    def __init__(self, problems: list[Problem], message: str | None = None) -> None:
        self.problems = list(problems)
        summary = message or (
            self.problems[0].format()
            if len(self.problems) == 1
            else f"{len(self.problems)} problems in the workflow definition"
        )
        super().__init__(summary)


class ExpressionError(WovyrError):
    """An expression failed."""

    def __init__(self, message: str | None = None, *, where: str = "", hint: str | None = None):
        self.where = where
        super().__init__(f"{where}: {message}" if where and message else message, hint=hint)


class InputError(WovyrError):
    """The workflow inputs are invalid."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = list(problems)
        # Each problem with its hint ("did you mean 'name'?"): the message is all a CLI or
        # log shows.
        text = "; ".join(p.message + (f" ({p.hint})" if p.hint else "") for p in self.problems)
        super().__init__(text or None)


class NotFound(WovyrError):
    """Not found."""


class Conflict(WovyrError):
    """The request conflicts with the current state."""


class QuotaExceeded(WovyrError):
    """The tenant's quota is used up."""

    def __init__(
        self,
        message: str | None = None,
        *,
        budget: str = "",
        limit: float | None = None,
        retry_after: float = 1.0,
        hint: str | None = None,
    ) -> None:
        self.budget = budget  # which budget refused: executions_per_day, ...
        self.limit = limit
        self.retry_after = retry_after  # seconds until the budget has room again
        super().__init__(message, hint=hint)


class ExecutionFinished(Conflict):
    """The execution has already finished."""


class DefinitionConflict(Conflict):
    """A different definition is already stored under that name and version."""


class DefinitionDrift(Conflict):
    """The definition sent is not the one the execution is pinned to."""

    def __init__(self, execution_id: str, sent: str, pinned: str) -> None:
        self.sent, self.pinned = sent, pinned
        super().__init__(
            f"definition drift: the definition sent ({sent}) is not the one execution "
            f"{execution_id} is pinned to ({pinned})",
            hint="leave the definition out: the execution always runs on its pinned one",
        )


class ActivityNotRegistered(WovyrError):
    """No activity handler is registered under that name."""


class StoreError(WovyrError):
    """The store failed."""


class LeaseLost(StoreError):
    """The lease on this execution was lost to another worker; nothing was committed."""


class StoreUnavailable(StoreError):
    """The store cannot be reached."""


class ConfigError(WovyrError):
    """The configuration is invalid."""


class KmsError(WovyrError):
    """A key or a sealed value could not be used."""


class RemoteError(WovyrError):
    """The server refused or failed the request."""

    def __init__(
        self,
        message: str | None = None,
        *,
        status: int = 0,
        problems: Sequence[Problem] = (),
        type: str = "",
        hint: str | None = None,
    ) -> None:
        self.status = status  # the HTTP status (0: no answer)
        self.problems = list(problems)  # the problem document's located problems
        self.type = type  # the problem document's `type` (urn:wovyr:problem:...)
        super().__init__(message, hint=hint)


class RequestInvalid(RemoteError):
    """The server found the request invalid."""


class AccessDenied(RemoteError):
    """The server refused the API key (missing, unknown, revoked, or without the role)."""


class ServerError(RemoteError):
    """The server failed to handle the request."""


class ServerUnreachable(RemoteError):
    """The server could not be reached."""


class BackupRefused(WovyrError):
    """The backup cannot be used: it is damaged, incomplete or from a newer Wovyr."""


class CalendarRangeError(WovyrError, ValueError):
    """The time lies beyond the calendar Python can represent (years 1 to 9999)."""
