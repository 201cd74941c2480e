"""The expression context of an execution: what `${{ ... }}` may read (inputs, the
activities' outputs, statuses and errors, and facts about the execution)."""

from __future__ import annotations

from typing import Any

from wovyr.engine.core.state import ExecutionState

__all__ = ["LazyContext", "expression_context"]


def expression_context(
    state: ExecutionState, extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "inputs": state.input,
        "activities": {
            aid: {
                "output": a.output,
                "status": a.status,
                "error": a.error,
                "iterations": a.iterations,
                "exhausted": a.exhausted,
            }
            for aid, a in state.activities.items()
        },
        "execution": {
            "id": state.id,
            "workflow": state.workflow,
            "version": state.version,
            "started_at": state.created_at,
        },
        **(extra or {}),
    }


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
