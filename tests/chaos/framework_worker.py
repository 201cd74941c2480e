"""Worker processes for the SIGKILL test of agents of other frameworks
(`test_framework_agent_kill.py`): a Pydantic AI agent (`DurableAgent`) or an OpenAI Agents
SDK agent (`DurableRunner`) with two tools, run by a workflow function.

Usage: python framework_worker.py FRAMEWORK DB EFFECTS_FILE LEASE_SECONDS

It imports Wovyr and the framework once, applies the workflow function of FRAMEWORK
(`pydantic_ai` or `openai_agents`) to the SQLite store DB, and prints ``ready <workflow>``.
Then it reads commands on stdin, one a line:

- ``start <life> <base URL>`` forks a worker process (the "life"; one at a time), which makes
  the agent with its model at the base URL, registers its activities, drives every
  execution in the store to the end and exits 0. This process prints ``pid <pid>``, and
  ``exit <pid> <code>`` once it ended (``-9``: killed by SIGKILL).
- ``kill`` sends SIGKILL to that worker process, if it has not ended.

So a life costs a fork, not an interpreter and the frameworks' imports, and the process that
kills a worker is the one that reaps it (its id is never reused before the kill).

The tools `note` and `stamp` append "<run>/n<n> <life> <wall time>" to EFFECTS_FILE (fsync'd)
and then pause a little, so kills land before, inside and after tool calls; they return
"<run>/n<n>", the call's key, which the step records. The test gives every life its own base
URL (`.../life-<n>/v1`): it can tell which process made each model request and each effect.
"""

from __future__ import annotations

import asyncio
import os
import random
import select
import signal
import sys
import time
import traceback
from typing import Any

from agents import Agent as SdkAgent
from agents import OpenAIProvider as SdkProvider
from agents import RunContextWrapper, function_tool
from openai import AsyncOpenAI
from pydantic_ai import Agent, RunContext
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

import wovyr
from wovyr.activities.base import ActivityRegistry
from wovyr.code.workflow import CodeWorkflow
from wovyr.engine.engine import Engine
from wovyr.integrations.openai_agents import DurableRunner
from wovyr.integrations.pydantic_ai import DurableAgent
from wovyr.store.sqlite import SQLiteStore
from wovyr.worker import Worker

KEY = "sk-canary-frameworks-kill-7d41"
STEP = {"retry": {"max_attempts": 5, "initial_interval": 0}, "timeout": "2m"}

# the agent this life made, where the workflow functions, replayed in it, find it
AGENT: dict[str, Any] = {}
EFFECTS = {"path": "", "life": ""}


@wovyr.workflow(name="pydantic-ai-turns")
async def pydantic_ai_turns(ctx: wovyr.Context, run: str) -> str:
    result = await AGENT["pydantic_ai"].run(ctx, f"run {run}", deps=run)
    return str(result.output)


@wovyr.workflow(name="openai-agents-turns")
async def openai_agents_turns(ctx: wovyr.Context, run: str) -> str:
    runner, agent = AGENT["openai_agents"]
    result = await runner.run(ctx, agent, f"run {run}", context={"run": run})
    return str(result.final_output)


WORKFLOWS: dict[str, CodeWorkflow] = {
    "pydantic_ai": pydantic_ai_turns,
    "openai_agents": openai_agents_turns,
}


async def effect(run: str, n: int) -> str:
    """The side effect of a tool call: one line in the effects file, then a pause."""
    key = f"{run}/n{n}"
    fd = os.open(EFFECTS["path"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{key} {EFFECTS['life']} {time.time()!r}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    await asyncio.sleep(random.uniform(0, 0.05))
    return key


def client(base_url: str) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=base_url, api_key=KEY, max_retries=0)


def pydantic_ai_agent(base_url: str, registry: ActivityRegistry) -> None:
    model = OpenAIChatModel("gpt-test", provider=OpenAIProvider(openai_client=client(base_url)))
    agent: Agent[str, str] = Agent(model, name="turns", deps_type=str)

    @agent.tool
    async def note(ctx: RunContext[str], n: int) -> str:
        """Note a number."""
        return await effect(ctx.deps, n)

    @agent.tool
    async def stamp(ctx: RunContext[str], n: int) -> str:
        """Stamp a number."""
        return await effect(ctx.deps, n)

    AGENT["pydantic_ai"] = DurableAgent(agent, registry=registry, model_step=STEP, tool_step=STEP)


def openai_agents_agent(base_url: str, registry: ActivityRegistry) -> None:
    @function_tool
    async def note(wrapper: RunContextWrapper[Any], n: int) -> str:
        """Note a number."""
        return await effect(wrapper.context["run"], n)

    @function_tool
    async def stamp(wrapper: RunContextWrapper[Any], n: int) -> str:
        """Stamp a number."""
        return await effect(wrapper.context["run"], n)

    agent: SdkAgent[Any] = SdkAgent(name="turns", model="gpt-test", tools=[note, stamp])
    runner = DurableRunner(
        "turns",
        model_provider=SdkProvider(openai_client=client(base_url)),
        agents=[agent],
        registry=registry,
        model_step=STEP,
        tool_step=STEP,
    )
    AGENT["openai_agents"] = (runner, agent)


MAKE = {"pydantic_ai": pydantic_ai_agent, "openai_agents": openai_agents_agent}


def life(framework: str, db: str, lease: float, base_url: str) -> None:
    """One worker process: make the agent, then drive every execution to the end."""
    registry = ActivityRegistry()
    MAKE[framework](base_url, registry)
    engine = Engine(SQLiteStore(db), activities=registry)

    async def run() -> None:
        while True:
            worker = Worker(engine, lease_seconds=lease, concurrency=16)
            try:
                await worker.run_until_idle()
            finally:
                await worker.close()
            if not engine.list(status="running", limit=1).items:
                return
            await asyncio.sleep(lease / 4)  # a killed life's leases have yet to expire

    asyncio.run(run())
    engine.close()


def warm_up(framework: str, db: str) -> None:
    """Import what a life uses, and apply the workflow function to the store (closed again
    before any fork)."""
    registry = ActivityRegistry()
    MAKE[framework]("http://127.0.0.1:9/v1", registry)  # imports, builds the schemas
    engine = Engine(SQLiteStore(db), activities=registry)
    engine.apply(WORKFLOWS[framework].definition())
    engine.close()
    AGENT.clear()


def lines(fd: int) -> Any:
    """The lines read from `fd` so far (a generator: None when there is none yet)."""
    pending = b""
    while True:
        ready, _, _ = select.select([fd], [], [], 0.01)
        if not ready:
            yield None
            continue
        chunk = os.read(fd, 4096)
        if not chunk:
            return
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            yield line.decode()


def main() -> None:
    framework, db, effects, lease = sys.argv[1:5]
    EFFECTS["path"] = effects
    warm_up(framework, db)
    print(f"ready {WORKFLOWS[framework].name}", flush=True)
    child: int | None = None
    for line in lines(sys.stdin.fileno()):
        if child is not None:
            done, status = os.waitpid(child, os.WNOHANG)
            if done:
                print(f"exit {child} {os.waitstatus_to_exitcode(status)}", flush=True)
                child = None
        if line is None:
            continue
        command, *args = line.split()
        if command == "kill":
            if child is not None:  # not reaped yet: the id is still this child's
                os.kill(child, signal.SIGKILL)
            continue
        assert command == "start" and child is None, line
        number, base_url = args
        pid = os.fork()
        if pid == 0:  # the life: never returns into this loop
            code = 0
            try:
                os.dup2(2, 1)  # its output is not the protocol's
                random.seed()
                EFFECTS["life"] = number
                life(framework, db, float(lease), base_url)
            except BaseException:
                traceback.print_exc()
                code = 1
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        child = pid
        print(f"pid {pid}", flush=True)
    if child is not None:  # stdin closed with a life running: end it
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)


if __name__ == "__main__":
    main()
