"""The `set` kind: values computed from expressions. The decider settles it in the same
step that schedules it (no attempt, no worker): the rendered mapping is the output."""

from __future__ import annotations

from typing import Any

from wovyr.activities.kinds import ActivityKind, register_kind
from wovyr.fields import FrozenModel

__all__ = ["KIND", "SetStep"]


class SetStep(FrozenModel):
    set: dict[str, Any]


KIND = register_kind(
    ActivityKind(
        name="set",
        model=SetStep,
        spec=lambda step: step.set,
        execute=None,
        settle="value",
        description="values computed from expressions",
    )
)
