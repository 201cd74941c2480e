"""The expression context of an execution: what `${{ ... }}` may read (inputs, the
activities' outputs, statuses and errors, and facts about the execution)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from wovyr.engine.core.state import ActivityState, ExecutionState

__all__ = ["ActivitiesView", "LazyContext", "expression_context"]


def expression_context(
    state: ExecutionState, extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "inputs": state.input,
        "activities": ActivitiesView(state.activities),
        "execution": {
            "id": state.id,
            "workflow": state.workflow,
            "version": state.version,
            "started_at": state.created_at,
        },
        **(extra or {}),
    }


class ActivitiesView(Mapping[str, dict[str, Any]]):
    """`activities` in the expression context: what an expression may read of each activity,
    made when it is read (an expression reads the few activities it names, and the
    evaluator selects those before converting anything; building all of them was a cost
    per step that grew with the workflow)."""

    __slots__ = ("_activities",)

    def __init__(self, activities: Mapping[str, ActivityState]) -> None:
        self._activities = activities

    def __getitem__(self, activity_id: str) -> dict[str, Any]:
        a = self._activities[activity_id]
        return {
            "output": a.output,
            "status": str(a.status),  # the text: the evaluator takes JSON values only
            "error": a.error,
            "iterations": a.iterations,
            "exhausted": a.exhausted,
        }

    def __iter__(self) -> Iterator[str]:
        return iter(self._activities)

    def __len__(self) -> int:
        return len(self._activities)


class LazyContext:
    """The expression context of one state, built on first use: most activities a pass
    looks at need none (they are running, or waiting for what they need)."""

    __slots__ = ("_state", "_value")

    def __init__(self, state: ExecutionState) -> None:
        self._state = state
        self._value: dict[str, Any] | None = None

    def __call__(self) -> dict[str, Any]:
        if self._value is None:
            self._value = expression_context(self._state)
        return self._value
