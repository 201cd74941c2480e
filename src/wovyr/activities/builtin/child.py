"""The `workflow` kind: a child workflow. An attempt starts (or finds) the child; the
child's end is appended to the parent in the transaction that finishes the child."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from wovyr.activities.base import NonRetryableError
from wovyr.activities.dispatch import Dispatch
from wovyr.activities.kinds import ActivityKind, ChildStarted, register_kind
from wovyr.fields import NAME_PATTERN, FrozenModel, Version

__all__ = ["KIND", "ChildStep", "ChildWorkflowSpec"]


class ChildWorkflowSpec(FrozenModel):
    name: str = Field(pattern=NAME_PATTERN)
    version: Version | None = None
    input: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None
    priority: int | None = Field(
        default=None, ge=0, le=9, description="0-9; default: the parent's priority"
    )


class ChildStep(FrozenModel):
    workflow: ChildWorkflowSpec


async def _execute(step: ChildStep, rendered: Any, dispatch: Dispatch) -> ChildStarted:
    if dispatch.start_child is None:
        raise NonRetryableError("this worker starts no child workflows", type="NoChildStarts")
    return ChildStarted(await dispatch.start_child())


KIND = register_kind(
    ActivityKind(
        name="workflow",
        model=ChildStep,
        spec=lambda step: step.workflow.model_dump(mode="json", exclude_none=True),
        execute=_execute,
        description="a child workflow",
        default_attempts=1,
        compensates=False,
        repeat_lost=True,
        needs=frozenset({"start_child"}),
    )
)
