"""What `query` returns: a read-only picture of one execution."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from wovyr.definition.model import Workflow
from wovyr.engine.core.policy import retry_policy
from wovyr.engine.core.state import ActivityStatus, ExecutionState, ExecutionStatus
from wovyr.engine.core.waits import shown_status, waiting_on
from wovyr.store.base import ExecutionRecord

__all__ = ["ExecutionView", "build_view", "status_filter"]


@dataclass(frozen=True)
class ExecutionView:
    """A read-only picture of one execution, as `query` returns it."""

    id: str
    workflow: str
    version: str
    status: str
    input: dict[str, Any]
    output: Any
    error: Any
    created_at: str
    updated_at: str
    definition_hash: str
    parent_id: str | None
    event_count: int
    waiting_on: str | None
    activities: dict[str, dict[str, Any]] = field(default_factory=dict)
    pending_waits: list[dict[str, Any]] = field(default_factory=list)
    buffered_signals: dict[str, int] = field(default_factory=dict)
    # continue-as-new: the run this one continues, the run that continues it, and the
    # chain ({root: its logical id, run: this run's number}); None outside a chain
    continued_from: str | None = None
    continued_as: str | None = None
    chain: dict[str, Any] | None = None

    @property
    def finished(self) -> bool:
        return self.status in ExecutionStatus.TERMINAL

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def build_view(workflow: Workflow, record: ExecutionRecord, state: ExecutionState) -> ExecutionView:
    """The read-only picture of one execution that `query` returns."""
    activities: dict[str, dict[str, Any]] = {}
    pending: list[dict[str, Any]] = []
    for act in workflow.activities:
        a = state.activity(act.id)
        activities[act.id] = {
            "status": a.status,
            "kind": act.kind,
            "attempt": a.attempt,
            "max_attempts": retry_policy(act).max_attempts,
            "recoveries": a.recoveries,  # re-runs after a lost worker (not attempts)
            "needs": act.needs,
            "input": a.input,
            "output": a.output,
            "error": a.error,
            "started_at": a.started_at,
            "finished_at": a.finished_at,
            "next_attempt_at": a.next_attempt_at,
            "wait": a.wait,
            "iterations": a.iterations,  # of a `repeat`: completed so far
            "max_iterations": act.repeat.max_iterations if act.repeat is not None else None,
            "exhausted": a.exhausted,
            "skip_reason": a.skip_reason,
            "child": a.child,
            "items": [
                {k: item.get(k) for k in ("status", "attempt", "output", "error", "child")}
                for item in a.items
            ]
            if a.items is not None
            else None,
        }
        if a.status == ActivityStatus.WAITING and a.wait:
            pending.append({"activity": act.id, **a.wait})
    return ExecutionView(
        id=record.id,
        workflow=state.workflow,
        version=state.version,
        status=shown_status(state),
        input=state.input,
        output=state.output,
        error=state.error,
        created_at=state.created_at,
        updated_at=state.updated_at,
        definition_hash=state.definition_hash,
        parent_id=state.parent_id,
        event_count=state.seq,
        waiting_on=waiting_on(state),
        activities=activities,
        pending_waits=pending,
        buffered_signals={k: len(v) for k, v in state.signals.items()},
        continued_from=state.continued_from,
        continued_as=state.continued_as,
        chain={"root": state.chain_root, "run": state.chain_run} if state.chain else None,
    )


def status_filter(status: str | None) -> tuple[str | None, bool | None]:
    """The stored status and `waiting` filter (`ExecutionFilter`) of the executions shown as
    `status`: `waiting` ones are stored `running` with a `waiting_on` text, `running` ones
    without; the others are stored as they are shown."""
    if status == "waiting":
        return "running", True
    if status == "running":
        return "running", False
    return status, None
