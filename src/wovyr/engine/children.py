"""The children of an execution over a runtime: the child workflow of one attempt of a
`workflow` activity, and of one tool call of an `agent` activity. Each child's id is
derived from its parent's step, so a crashed or retried attempt finds the same child
instead of starting another; a child is started as any start is (`prepare_start`)."""

from __future__ import annotations

import hashlib
import re
from typing import Any

from wovyr.activities.base import NonRetryableError
from wovyr.definition.model import ChildWorkflowSpec
from wovyr.engine.core.policy import RunActivity
from wovyr.engine.core.state import ExecutionState
from wovyr.engine.definitions import Definitions
from wovyr.engine.runtime import Runtime
from wovyr.engine.starts import enforce_on_limit, prepare_start
from wovyr.ids import ID_RULE, child_id, derived_id, is_chain_run_id, is_execution_id
from wovyr.traces import TraceContext

__all__ = ["start_child", "start_tool_child"]


def start_tool_child(
    rt: Runtime,
    parent: ExecutionState,
    activity_id: str,
    workflow_name: str,
    inputs: Any,
    call: dict[str, Any],
    trace: TraceContext | None = None,
) -> str:
    """Start (or find) the child workflow of one tool call of an `agent` activity (its
    latest registered version): its id is derived from the parent, the activity, the
    call's turn and id, so a crashed or retried attempt finds the same child. When the
    child ends, `ChildFinished` carries `call` and joins the activity's journal as that
    call's result (`wovyr.activities.kinds.AwaitChildren`). `InputError` when `inputs`
    do not fit the workflow. `trace`: the span of the attempt that starts it."""
    call_id = str(call["call_id"])
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", call_id):
        call_id = "h" + hashlib.sha256(call_id.encode()).hexdigest()[:16]
    execution_id = derived_id(f"{parent.id}::{activity_id}:t{int(call['turn'])}-{call_id}")
    if rt.store.load(execution_id, rt.tenant) is not None:
        return execution_id
    if parent.depth + 1 > rt.limits.max_child_depth:
        raise NonRetryableError(
            f"child workflow depth limit ({rt.limits.max_child_depth}) reached: "
            f"{parent.workflow} would start {workflow_name} at depth {parent.depth + 1}",
            type="ChildDepthExceeded",
        )
    workflow, digest = Definitions(rt).named(workflow_name, None)
    origin: dict[str, Any] = {
        "id": parent.id,
        "activity": activity_id,
        "index": None,
        "attempt": None,
        "call": call,
    }
    new = prepare_start(
        rt,
        workflow,
        digest,
        inputs if isinstance(inputs, dict) else {},
        execution_id=execution_id,
        parent_id=parent.id,
        extra={"parent": origin, "depth": parent.depth + 1},
        trace=trace,
    )
    created, _ = rt.store.create_execution(new)
    if created:
        rt.notify(execution_id)
    return execution_id


def start_child(
    rt: Runtime, parent: ExecutionState, run: RunActivity, trace: TraceContext | None = None
) -> str:
    """Start (or find) the child workflow of one attempt of a `workflow` activity, in
    this engine's tenant. Its id is derived (`wovyr.ids.child_id`), or the `id` the
    activity gives (which must be a valid execution id: else the attempt fails for good
    with `InvalidChildId`), with `~<attempt>` after a first attempt. `trace`: the span
    of the attempt that starts it (the child's start span is its child)."""
    spec = ChildWorkflowSpec.model_validate(run.input)
    if spec.id is not None and not is_execution_id(spec.id):
        raise NonRetryableError(
            f"the child workflow id {spec.id!r} is refused: {ID_RULE}", type="InvalidChildId"
        )
    if spec.id is not None and is_chain_run_id(spec.id):
        # a chain's later runs are `<root>~c<n>`: a child taking one would stand in the
        # way of (or be mistaken for) a run of that chain
        raise NonRetryableError(
            f"the child workflow id {spec.id!r} ends like a continue-as-new chain's runs "
            "('~c<number>'): those ids are reserved",
            type="InvalidChildId",
        )
    # iteration n > 1 of a `repeat` starts a child of its own: `~i<n>` names it
    again = f"~i{run.iteration}" if run.iteration > 1 else ""
    if spec.id is None:
        activity = run.activity_id + again
        text = child_id(parent.id, activity, run.index, run.attempt, shorten=False)
    else:
        text = spec.id + again
        text = text if run.attempt == 1 else f"{text}~{run.attempt}"
    execution_id = derived_id(text)
    if text != execution_id and rt.store.load(text, rt.tenant) is not None:
        return text  # started before ids were shortened: the same child
    if rt.store.load(execution_id, rt.tenant) is not None:
        return execution_id
    if parent.depth + 1 > rt.limits.max_child_depth:
        raise NonRetryableError(
            f"child workflow depth limit ({rt.limits.max_child_depth}) reached: "
            f"{parent.workflow} would start {spec.name} at depth {parent.depth + 1} "
            "(a workflow that starts itself without end?)",
            type="ChildDepthExceeded",
        )
    workflow, digest = Definitions(rt).named(spec.name, spec.version)
    if workflow.continue_as_new is not None:
        raise NonRetryableError(
            f"workflow {spec.name!r} v{workflow.version} declares continue_as_new and "
            f"cannot run as a child of activity {run.activity_id!r}: a chain outlives "
            "the step that waits for it; start it on its own (a schedule, a start)",
            type="ContinueAsNewChild",
        )
    origin = {
        "id": parent.id,
        "activity": run.activity_id,
        "index": run.index,
        "attempt": run.attempt,
    }
    new = prepare_start(
        rt,
        workflow,
        digest,
        spec.input,
        execution_id=execution_id,
        parent_id=parent.id,
        extra={"parent": origin, "depth": parent.depth + 1},
        # a child runs at its parent's priority unless the activity sets its own
        priority=spec.priority if spec.priority is not None else parent.priority,
        trace=trace,
    )
    created, _ = rt.store.create_execution(new)
    if created:
        rt.notify(execution_id)
        enforce_on_limit(rt, new)
    return execution_id
