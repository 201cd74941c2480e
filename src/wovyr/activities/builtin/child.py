"""The `workflow` kind: a child workflow. An attempt starts (or finds) the child; the
child's end is appended to the parent in the transaction that finishes the child."""

from __future__ import annotations

from typing import Any

from wovyr.activities.base import NonRetryableError
from wovyr.activities.dispatch import Dispatch
from wovyr.activities.kinds import ActivityKind, ChildStarted, register_kind
from wovyr.kinds.steps import CHILD, ChildStep, ChildWorkflowSpec

__all__ = ["KIND", "ChildStep", "ChildWorkflowSpec"]


async def _execute(step: ChildStep, rendered: Any, dispatch: Dispatch) -> ChildStarted:
    if dispatch.start_child is None:
        raise NonRetryableError("this worker starts no child workflows", type="NoChildStarts")
    return ChildStarted(await dispatch.start_child())


KIND = register_kind(ActivityKind.of(CHILD, execute=_execute, needs=frozenset({"start_child"})))
