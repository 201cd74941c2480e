"""`/api/v1/agents`: the tenant's agents registry (apply, list, show) and agent runs.

`POST /api/v1/agents` takes the agent document (`kind: Agent`) as YAML text or a JSON object
and registers it like a definition (operator; 201 applied, 200 unchanged, 409 when that
name and version hold different content, 422 with located problems; a tool no handler is
registered as is refused when this process has handlers loaded). A run is an execution
(`wovyr.engine.agents`): `POST /api/v1/agents/{agent}/runs` with `{input}` starts it and
waits for its end at most `wait` seconds (default 10), answering 200 with the result, or
202 and `Location: /api/v1/agents/runs/{id}` when it has not ended; with the header
`Prefer: respond-async` it answers 202 at once. The worker holds the run, never this
request. `GET /api/v1/agents/runs/{id}` reads its status, turns so far, usage and result.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import anyio
from fastapi import Header, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from wovyr.engine.agents import (
    AgentRun,
    agent_run,
    apply_agent,
    list_agents,
    named_agent,
    start_agent_run,
)
from wovyr.server.api.documents import APPLIED, DOCUMENT_BODY, read_document
from wovyr.server.deps import Ctx, Operator, Viewer, tenant_engine
from wovyr.server.guard import api_router
from wovyr.server.problems import LOCATION_HEADER, located, problem_responses

__all__ = ["router"]

router = api_router("/api/v1/agents", "agents", 401, 403, 404, 413, 422, strict=False)

POLL_SECONDS = 0.05  # how often a synchronous run's request looks at the execution
MAX_WAIT = 60.0


class AgentOut(BaseModel):
    name: str
    version: str
    hash: str
    applied_at: datetime


class AgentListed(AgentOut):
    model: str | None  # the model its steps ask for (None: the provider's default)
    tools: list[str]  # the tools it may call


class AgentApplied(AgentOut):
    result: str  # "applied" or "unchanged"


class AgentDetail(AgentOut):
    agent: dict[str, Any]


class RunRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"input": "Summarize yesterday's failed orders."}]},
    )
    input: Any = Field(None, description="The task: text or any JSON value.")
    id: str | None = Field(None, min_length=1, max_length=200, description="The run's id.")


class RunOut(BaseModel):
    id: str
    agent: str
    version: str
    status: str
    turns: int
    usage: dict[str, int]
    cost: float | None
    result: Any
    error: Any


def _run_out(run: AgentRun) -> RunOut:
    return RunOut.model_validate(run, from_attributes=True)


@router.post(
    "",
    status_code=201,
    response_model=AgentApplied,
    summary="Apply an agent (YAML or JSON body)",
    responses={**APPLIED, **problem_responses(409, 415)},
    openapi_extra=DOCUMENT_BODY,
)
async def apply(
    request: Request, response: Response, ctx: Ctx, principal: Operator
) -> AgentApplied:
    """Register an agent document (YAML or JSON) under its name and version: 201 applied,
    200 unchanged, 409 when that version holds other content."""
    text = await read_document(request, "agent")
    engine = tenant_engine(ctx, principal)
    # parsing and validating an untrusted document is CPU work: never on the event loop
    outcome, _, document = await run_in_threadpool(apply_agent, engine, text)
    _, record = named_agent(engine, document.name, document.version)
    located(response, outcome == "applied", f"{router.prefix}/{document.name}")
    return AgentApplied(
        name=document.name,
        version=document.version,
        hash=record.hash,
        applied_at=record.created_at,
        result=outcome,
    )


@router.get("", response_model=list[AgentListed], summary="The tenant's agents")
def list_all(ctx: Ctx, principal: Viewer) -> list[AgentListed]:
    """The tenant's agents: each name with its latest version."""
    engine = tenant_engine(ctx, principal)
    return [
        AgentListed(
            name=d.name,
            version=d.version,
            hash=r.hash,
            applied_at=r.created_at,
            model=d.spec.model,
            tools=list(d.spec.tools),
        )
        for d, r in list_agents(engine)
    ]


@router.get("/runs/{run_id}", response_model=RunOut, summary="An agent run")
def get_run(run_id: str, ctx: Ctx, principal: Viewer) -> RunOut:
    """An agent run: its status, its answer once ended, and its calls so far."""
    return _run_out(agent_run(tenant_engine(ctx, principal), run_id))


@router.get("/{agent}", response_model=AgentDetail, summary="An agent's latest version")
def show(
    agent: str,
    ctx: Ctx,
    principal: Viewer,
    version: Annotated[str | None, Query(min_length=1, max_length=100)] = None,
) -> AgentDetail:
    """An agent's latest version (or `version`): its document as registered."""
    document, record = named_agent(tenant_engine(ctx, principal), agent, version)
    return AgentDetail(
        name=document.name,
        version=document.version,
        hash=record.hash,
        applied_at=record.created_at,
        agent=document.model_dump(by_alias=True, mode="json", exclude_defaults=True),
    )


@router.post(
    "/{agent}/runs",
    status_code=200,
    response_model=RunOut,
    summary="Run an agent (synchronous with a bounded wait, or `Prefer: respond-async`)",
    responses={
        202: {
            "description": "Started and not ended yet: poll `Location`.",
            "headers": LOCATION_HEADER,
        }
    },
)
async def run(
    agent: str,
    body: RunRequest,
    response: Response,
    ctx: Ctx,
    principal: Operator,
    wait: Annotated[
        float, Query(ge=0, le=MAX_WAIT, description="Seconds to wait for the end.")
    ] = 10.0,
    prefer: Annotated[str | None, Header(max_length=500)] = None,
) -> RunOut:
    """Run an agent on `input`: waits up to `wait` seconds for its answer (200), else
    answers 202 with `Location` to poll; `Prefer: respond-async` answers 202 at once."""
    engine = tenant_engine(ctx, principal)
    started = await run_in_threadpool(start_agent_run, engine, agent, body.input, run_id=body.id)
    run_id = started.record.id
    location = f"{router.prefix}/runs/{run_id}"
    asynchronous = prefer is not None and "respond-async" in prefer.lower()
    current = await run_in_threadpool(agent_run, engine, run_id)
    if not asynchronous:
        with anyio.move_on_after(wait):
            while not current.ended:
                await anyio.sleep(POLL_SECONDS)
                current = await run_in_threadpool(agent_run, engine, run_id)
    else:
        response.headers["Preference-Applied"] = "respond-async"
    if not current.ended:
        response.status_code = 202
        response.headers["Location"] = location
    else:
        response.headers["Content-Location"] = location
    return _run_out(current)
