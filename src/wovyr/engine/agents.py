"""The agents registry on top of the definitions registry (`wovyr.definition.agent`).

Applying an agent registers the workflow it runs as (`agent.<name>`, one `agent`
activity) through `Engine.apply`, audited as `agent.apply` in the same transaction; a run is
an ordinary execution of that workflow started through `Engine.submit` with the input
`{"input": <the task, as text>}`, so it is in the execution lists and the UI, is held by the
worker (not by a connection) and survives restarts. A run's view is read from the
execution: its status, the turns recorded so far (`ModelCallCompleted` events), their usage
and cost, and the result once it ended.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wovyr.definition.agent import (
    AGENT_PREFIX,
    AgentDocument,
    agent_of,
    agent_tool_problems,
    agent_workflow,
    agent_workflow_tool_problems,
    load_agent,
    workflow_name,
)
from wovyr.definition.parse import read_source
from wovyr.errors import DefinitionError, InputError, NotFound, Problem
from wovyr.events import EventType
from wovyr.statuses import ExecutionStatus
from wovyr.store.records import DefinitionRecord

if TYPE_CHECKING:
    from wovyr.engine.engine import Engine, Started

__all__ = [
    "AgentRun",
    "agent_run",
    "apply_agent",
    "list_agents",
    "named_agent",
    "start_agent_run",
]


def apply_agent(
    engine: Engine, source: str | bytes | Path, *, filename: str = "<input>"
) -> tuple[str, str, AgentDocument]:
    """Register an agent document: ("applied" | "unchanged", hash, document). Its tools are
    checked against the handlers registered in this engine when it has any (a process that
    loaded none does not know the tool registry: the worker reports them at run time)."""
    if isinstance(source, Path):
        filename, source = str(source), read_source(source)
    document, smap = load_agent(source, filename)
    problems = agent_workflow_tool_problems(
        document,
        smap,
        lambda name: engine.store.registered_definition(name, None, engine.tenant) is not None,
    )
    if engine.activities.names():
        problems += agent_tool_problems(document, smap, engine.activities)
    if problems:
        raise DefinitionError(problems)
    workflow = agent_workflow(document)
    target = f"{document.name}@{document.version}"
    outcome, digest = engine.apply(workflow, audit_as=("agent.apply", target))
    return outcome, digest, document


def list_agents(engine: Engine) -> list[tuple[AgentDocument, DefinitionRecord]]:
    """The tenant's agents, each at its latest applied version, newest first."""
    found = []
    for record in engine.store.list_registered(engine.tenant):
        if not record.name.startswith(AGENT_PREFIX):
            continue
        document = agent_of(engine.definition(record.hash, engine.tenant))
        if document is not None:
            found.append((document, record))
    return found


def named_agent(
    engine: Engine, name: str, version: str | None = None
) -> tuple[AgentDocument, DefinitionRecord]:
    """A registered agent (the latest version, or `version`); NotFound otherwise."""
    record = engine.store.registered_definition(workflow_name(name), version, engine.tenant)
    document = None
    if record is not None:
        document = agent_of(engine.definition(record.hash, engine.tenant))
    if record is None or document is None:
        what = f"{name!r} version {version!r}" if version else repr(name)
        raise NotFound(f"no agent {what} is registered", hint="apply it with `wovyr agents apply`")
    return document, record


def start_agent_run(engine: Engine, name: str, input: Any, *, run_id: str | None = None) -> Started:
    """Start a run of a registered agent (an execution of its workflow)."""
    _, record = named_agent(engine, name)
    if input is None:
        raise InputError([Problem("a run needs an input (the task)", path="input")])
    task = input if isinstance(input, str) else json.dumps(input, ensure_ascii=False)
    return engine.submit(
        None, {"input": task}, name=record.name, version=record.version, execution_id=run_id
    )


@dataclass(frozen=True)
class AgentRun:
    id: str
    agent: str
    version: str
    status: str
    turns: int
    usage: dict[str, int]
    cost: float | None
    result: Any
    error: Any

    @property
    def ended(self) -> bool:
        return self.status in ExecutionStatus.TERMINAL


def agent_run(engine: Engine, run_id: str) -> AgentRun:
    """A run's status, turns so far, usage and result; NotFound for an execution that is not
    an agent's run (or another tenant's)."""
    view = engine.query(run_id)
    workflow = engine.definition(view.definition_hash)
    document = agent_of(workflow)
    if document is None:
        raise NotFound(f"agent run {run_id} not found")
    turns, inputs, outputs = 0, 0, 0
    cost: float | None = 0.0
    for event in engine.store.history(view.id, tenant=engine.tenant):
        if event.type != EventType.MODEL_CALL_COMPLETED:
            continue
        turns += 1
        inputs += int(event.data.get("usage", {}).get("input_tokens", 0))
        outputs += int(event.data.get("usage", {}).get("output_tokens", 0))
        spent = event.data.get("cost")
        cost = None if spent is None or cost is None else cost + float(spent)
    output = view.output if isinstance(view.output, dict) else None
    if output is not None and isinstance(output.get("turns"), int):
        turns = max(turns, output["turns"])  # a turn recorded without its event (a replay)
    return AgentRun(
        id=view.id,
        agent=document.name,
        version=document.version,
        status=view.status,
        turns=turns,
        usage={"input_tokens": inputs, "output_tokens": outputs},
        cost=cost,
        result=view.output if view.status == ExecutionStatus.COMPLETED else None,
        error=view.error,
    )
