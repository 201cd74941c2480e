"""Agent definitions (`kind: Agent`): a named, versioned agent that runs as a workflow.

An agent document

    apiVersion: wovyr/v1
    kind: Agent
    metadata: {name: helper, version: "1"}
    spec: {provider, model, instructions, tools, max_turns, budget, require_approval, ...}

is checked with located problems like a workflow, then becomes the workflow
`agent.<name>` of one `agent` activity whose input is the run's `input` (a string input:
a task given as another JSON value is sent as its JSON text, which is what the `agent`
activity sends the model for such a value anyway), and whose output is that activity's
output. That workflow is what the definitions registry stores (pinned by its
content hash, tenant-scoped, name and version conflicts refused) and what a run starts: the
registry and the start path are the workflows' own. The workflow carries the label
`wovyr.agent: <name>`, which is what tells an agent from a workflow that merely has a name
starting with `agent.`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from pydantic import Field

import wovyr.activities.builtin  # noqa: F401  (registers what runs the built-in kinds)
from wovyr.activities.base import ActivityRegistry
from wovyr.activities.kinds import KINDS
from wovyr.definition.locate import validated
from wovyr.definition.model import Named, Workflow
from wovyr.definition.parse import Limits, parse_document
from wovyr.definition.source import SourceMap
from wovyr.errors import DefinitionError, Problem
from wovyr.fields import NAME_PATTERN, Duration, FrozenModel, Version
from wovyr.kinds.options import Options
from wovyr.kinds.steps import AgentBudget, ContentPart, EmbeddingSpec, ToolName

__all__ = [
    "AGENT_LABEL",
    "AGENT_PREFIX",
    "AgentDocument",
    "agent_of",
    "agent_tool_problems",
    "agent_workflow",
    "agent_workflow_tool_problems",
    "load_agent",
    "workflow_name",
]

AGENT_LABEL = "wovyr.agent"
AGENT_PREFIX = "agent."


class AgentMetadata(FrozenModel):
    name: str = Field(pattern=NAME_PATTERN, description="Agent name, unique per tenant")
    version: Version = Field(default="1", description="Version label, e.g. '3'")
    description: str | None = None


class AgentDefinitionSpec(FrozenModel):
    """The `agent` activity's keys except `input` (a run gives that)."""

    provider: str = Field(default="default", description="The provider's name")
    model: str | None = Field(default=None, description="Default: the provider's model")
    instructions: str | None = Field(default=None, description="The system message")
    tools: list[ToolName] = Field(default_factory=list)
    attachments: list[ContentPart] = Field(
        default_factory=list, description="Content parts sent with every run's task"
    )
    max_turns: int = Field(default=10, ge=1, le=1000)
    budget: AgentBudget = Field(default_factory=AgentBudget)
    require_approval: list[ToolName] = Field(default_factory=list)
    approval_timeout: Duration | None = Field(default=None)
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, ge=1)
    stream: bool | None = Field(default=None, description="Stream and journal each answer's text")
    options: Options | None = Field(
        default=None, description="Provider parameters sent with every model call"
    )
    embedding: EmbeddingSpec | None = Field(
        default=None, description="The provider and model that embed memory texts"
    )


class AgentDocument(Named, FrozenModel):
    api_version: Literal["wovyr/v1"] = Field(alias="apiVersion")
    kind: Literal["Agent"]
    metadata: AgentMetadata
    spec: AgentDefinitionSpec = Field(default_factory=AgentDefinitionSpec)


def workflow_name(agent: str) -> str:
    """The name of the workflow an agent runs as."""
    return f"{AGENT_PREFIX}{agent}"


def load_agent(
    source: str | bytes, filename: str = "<input>", limits: Limits | None = None
) -> tuple[AgentDocument, SourceMap]:
    """Parse and check an agent document; DefinitionError carries every located problem."""
    data, smap = parse_document(source, filename, limits)
    if data.get("kind") == "Workflow":
        problem = smap.problem(
            "this is a workflow, not an agent",
            ("kind",),
            hint="apply workflows with `wovyr definitions apply`",
        )
        raise DefinitionError([problem])
    document = validated(AgentDocument, data, smap)
    if len(workflow_name(document.name)) > 128:
        message = "the name is too long (at most 122 characters)"
        problem = smap.problem(message, ("metadata", "name"))
        raise DefinitionError([problem])
    return document, smap


def agent_workflow(document: AgentDocument) -> Workflow:
    """The workflow the agent runs as (see the module docstring)."""
    spec = document.spec.model_dump(mode="json", exclude_defaults=True)
    metadata: dict[str, Any] = {
        "name": workflow_name(document.name),
        "version": document.version,
        "labels": {AGENT_LABEL: document.name},
    }
    if document.metadata.description is not None:
        metadata["description"] = document.metadata.description
    return Workflow.model_validate(
        {
            "apiVersion": "wovyr/v1",
            "kind": "Workflow",
            "metadata": metadata,
            "inputs": {"input": {"type": "string", "required": True}},
            "activities": [{"id": "agent", "agent": {**spec, "input": "${{ inputs.input }}"}}],
            "output": "${{ activities.agent.output }}",
        }
    )


def agent_of(workflow: Workflow) -> AgentDocument | None:
    """The agent document a stored workflow was made from (None: not an agent's)."""
    name = workflow.metadata.labels.get(AGENT_LABEL)
    if name is None or workflow.name != workflow_name(name) or len(workflow.activities) != 1:
        return None
    act = workflow.activities[0]
    if act.kind != "agent":
        return None
    spec = dict(KINDS.get("agent").spec(act.step))
    spec.pop("input", None)
    metadata: dict[str, Any] = {"name": name, "version": workflow.version}
    if workflow.metadata.description is not None:
        metadata["description"] = workflow.metadata.description
    return AgentDocument.model_validate(
        {"apiVersion": "wovyr/v1", "kind": "Agent", "metadata": metadata, "spec": spec}
    )


def agent_workflow_tool_problems(
    document: AgentDocument, smap: SourceMap | None, registered: Callable[[str], bool]
) -> list[Problem]:
    """The `workflow:NAME` tools in `spec.tools` whose workflow `registered` does not know
    (the tenant has not applied it), located at the key when the source map is given."""
    problems = []
    for i, tool in enumerate(document.spec.tools):
        if not tool.startswith("workflow:"):
            continue
        name = tool.removeprefix("workflow:")
        if registered(name):
            continue
        message = f"no workflow {name!r} is registered (a tool of this agent)"
        hint = f"apply it first: wovyr definitions apply FILE (metadata.name: {name})"
        at: tuple[str | int, ...] = ("spec", "tools", i)
        if smap is not None:
            problems.append(smap.problem(message, at, hint=hint))
        else:
            problems.append(Problem(message, path=f"spec.tools.{i}", hint=hint))
    return problems


def agent_tool_problems(
    document: AgentDocument, smap: SourceMap | None, tools: ActivityRegistry
) -> list[Problem]:
    """The tools in `spec.tools` that no handler in `tools` is registered as, located at the
    key in the document when its source map is given."""
    workflow = agent_workflow(document)
    act = workflow.activities[0]
    check = KINDS.get(act.kind).preflight
    found = check(act.step, tools) if check is not None else []
    problems = []
    for p in found:
        path = ("spec", *p.path[1:])  # ("agent", "tools", i) in the activity
        at = tuple(int(x) if x.isdigit() else x for x in path)
        if smap is not None:
            problems.append(smap.problem(p.message, at, hint=p.hint))
        else:
            problems.append(Problem(p.message, path=".".join(path), hint=p.hint))
    return problems
