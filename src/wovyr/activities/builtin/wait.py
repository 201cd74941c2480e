"""The `wait` kind: a signal, an approval or a durable timer. The decider drives it (see
`wovyr.engine.core.waits`); nothing runs in a worker."""

from __future__ import annotations

from pydantic import Field, model_validator

from wovyr.activities.kinds import ActivityKind, register_kind
from wovyr.fields import NAME_PATTERN, Duration, FrozenModel, Timestamp

__all__ = ["KIND", "ApprovalWait", "TimerWait", "WaitSpec", "WaitStep"]


class ApprovalWait(FrozenModel):
    timeout: Duration | None = None
    approvers: list[str] = Field(default_factory=list)


class TimerWait(FrozenModel):
    after: Duration | None = None
    at: Timestamp | None = None

    @model_validator(mode="after")
    def _one_of(self) -> TimerWait:
        if (self.after is None) == (self.at is None):
            raise ValueError("a timer takes exactly one of 'after' or 'at'")
        return self


class WaitSpec(FrozenModel):
    signal: str | None = Field(default=None, pattern=NAME_PATTERN)
    approval: ApprovalWait | None = None
    timer: TimerWait | None = None

    @model_validator(mode="after")
    def _one_of(self) -> WaitSpec:
        given = [k for k in ("signal", "approval", "timer") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("a wait takes exactly one of 'signal', 'approval' or 'timer'")
        return self

    @property
    def kind(self) -> str:
        return "signal" if self.signal else "approval" if self.approval else "timer"


class WaitStep(FrozenModel):
    wait: WaitSpec


KIND = register_kind(
    ActivityKind(
        name="wait",
        model=WaitStep,
        spec=lambda step: None,
        execute=None,
        settle="wait",
        description="a signal, an approval or a durable timer",
        default_attempts=1,
        compensates=False,
        per_item=False,
    )
)
