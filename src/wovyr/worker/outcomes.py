"""What one attempt ended with, as the decider reads it (`Outcome`), and what it used.

An executor returns an output, a `ChildStarted`, an `AwaitChildren` or an `AwaitApproval`,
or raises; `ended` and `failed` map either to an `Outcome`. The error of a failed attempt
keeps the handler's own frames (`error_record`); what Wovyr itself refused has none.
`billed` says what a result's usage adds to the step that records it.
"""

from __future__ import annotations

import logging
from typing import Any

from wovyr.activities.base import ActivityError
from wovyr.activities.failures import handler_traceback
from wovyr.activities.kinds import AwaitApproval, AwaitChildren, ChildStarted, Usage
from wovyr.activities.logs import attempt_ids
from wovyr.activities.redact import scrub
from wovyr.engine.core.decide import Outcome, RunActivity
from wovyr.engine.tenants import TenantPolicy, dispatch_note
from wovyr.errors import ActivityNotRegistered, WovyrError
from wovyr.events import Event, EventType
from wovyr.store.codec import PayloadRefused, check_payload

__all__ = [
    "billed",
    "calls_usage",
    "ended",
    "error_record",
    "failed",
    "not_current",
    "span_status",
]

_log = logging.getLogger("wovyr.worker")


def ended(result: Any, forms: list[str], max_bytes: int) -> Outcome:
    """The outcome of an attempt whose executor returned `result`. What cannot be stored
    (too large, too deep, not JSON) raises `PayloadRefused` (the attempt's failure); an
    output never repeats a secret's value (`forms`: a handler that echoes its input)."""
    if isinstance(result, ChildStarted):
        return Outcome(child=result.execution_id)
    if isinstance(result, AwaitChildren):
        return Outcome(suspend={"turn": result.turn, "children": result.children})
    if isinstance(result, AwaitApproval):
        check_payload(result.asked, "the approval asked", max_bytes=max_bytes)
        return Outcome(suspend=result.asked)
    check_payload(result, "the output", max_bytes=max_bytes)
    return Outcome(output=scrub(result, forms))


def failed(exc: Exception, timeout: float, policy: TenantPolicy | None) -> Outcome:
    """The outcome of an attempt that raised `exc`: retried unless the failure says it
    would fail again. `policy`: the tenant's, read for a kind with side effects (a refusal
    then says which policy refused and what allows the step)."""
    if isinstance(exc, TimeoutError):
        return Outcome(error={"type": "Timeout", "message": f"attempt exceeded {timeout}s"})
    if isinstance(exc, PayloadRefused):
        return Outcome(error=error_record(exc.type, exc.message), retryable=False)
    if isinstance(exc, ActivityError):
        message = exc.message
        if policy is not None:  # a refusal says which policy and what allows it
            allow = exc.details.get("allow") if isinstance(exc.details, dict) else None
            note = dispatch_note(exc.type, policy, allow)
            message = f"{message}: {note}" if note else message
        error = error_record(exc.type, message, exc.details, exc)
        return Outcome(error=error, retryable=exc.retryable, retry_after=exc.retry_after)
    if isinstance(exc, ActivityNotRegistered):
        return Outcome(error=error_record("ActivityNotRegistered", str(exc)), retryable=False)
    if isinstance(exc, TypeError | ValueError):
        if isinstance(exc, TypeError) and "cannot store" in str(exc):
            error = error_record("OutputNotSerializable", str(exc))
            return Outcome(error=error, retryable=False)
        return Outcome(error=error_record(type(exc).__name__, str(exc), exc=exc))
    if isinstance(exc, WovyrError):
        return Outcome(error=error_record(type(exc).__name__, str(exc), exc=exc), retryable=False)
    # a handler's own exception: retried per the policy
    return Outcome(error=error_record(type(exc).__name__, str(exc), exc=exc))


def billed(used: Usage, produced: list[Event]) -> Usage:
    """What the result of an attempt adds to the usage its step debits: its seconds, and
    the model usage its output records once that result is recorded (`produced`: an
    activity's, an item's of a `for_each`, an iteration's of a `repeat`, a compensation's).
    A result refused (its attempt no longer current) debits its seconds alone. The model
    calls an attempt journals (`ModelCallCompleted`) are debited by the step that records
    them (`calls_usage`)."""
    return used if produced else Usage(seconds=used.seconds)


def calls_usage(events: list[Event], total: Usage) -> Usage:
    """`total` with the tokens and cost of the model calls `events` record (an agent's
    sub-steps) added."""
    for e in events:
        if e.type == EventType.MODEL_CALL_COMPLETED:
            usage, spent = e.data.get("usage") or {}, e.data.get("cost")
            tokens = int(usage.get("input_tokens", 0)) + int(usage.get("output_tokens", 0))
            total += Usage(tokens=tokens, cost=float(spent or 0.0))
    return total


def span_status(outcome: Outcome) -> str:
    """What an attempt led to, as its span says."""
    if outcome.error is not None:
        return "failed"
    if outcome.child is not None:
        return "child"
    if outcome.suspend is not None:
        return "suspended"
    return "completed"


def not_current(run: RunActivity) -> ActivityError:
    return ActivityError(
        f"attempt {run.attempt} of {run.activity_id} is no longer current; nothing recorded",
        type="AttemptNotCurrent",
        retryable=False,
    )


def error_record(
    kind: str, message: str, details: Any = None, exc: BaseException | None = None
) -> dict[str, Any]:
    """The error of a failed attempt; `traceback` holds the handler's own frames of `exc`
    (capped; absent when the failure came from Wovyr, not from code of the user's). The
    whole of `exc` goes to the process's log, for the operator."""
    err: dict[str, Any] = {"type": kind, "message": message}
    if details is not None:
        err["details"] = details
    if exc is None:
        return err
    trace = handler_traceback(exc)
    if trace is not None:
        err["traceback"] = trace
    ids = attempt_ids()
    if ids is not None:  # masked like every record of the attempt
        _log.info(
            "execution %s of tenant %s: activity %s, attempt %s failed: %s: %s",
            ids.execution_id, ids.tenant, ids.activity_id, ids.attempt, kind, message,
            exc_info=(type(exc), exc, exc.__traceback__),
        )  # fmt: skip
    return err
