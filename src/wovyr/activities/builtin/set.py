"""The `set` kind: values computed from expressions. The decider settles it in the same
step that schedules it (no attempt, no worker): the rendered mapping is the output."""

from __future__ import annotations

from wovyr.activities.kinds import ActivityKind, register_kind
from wovyr.kinds.steps import SET, SetStep

__all__ = ["KIND", "SetStep"]


KIND = register_kind(ActivityKind.of(SET, execute=None))
