"""The `wait` kind: a signal, an approval or a durable timer. The decider drives it (see
`wovyr.engine.core.waits`); nothing runs in a worker."""

from __future__ import annotations

from wovyr.activities.kinds import ActivityKind, register_kind
from wovyr.kinds.steps import WAIT, ApprovalWait, TimerWait, WaitSpec, WaitStep

__all__ = ["KIND", "ApprovalWait", "TimerWait", "WaitSpec", "WaitStep"]


KIND = register_kind(ActivityKind.of(WAIT, execute=None))
