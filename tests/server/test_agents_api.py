"""The agents registry over the HTTP API: `kind: Agent` documents applied, listed and shown
per tenant with located errors (an unknown tool refused when handlers are loaded), and runs
- asynchronous (`Prefer: respond-async`: 202 + Location at once, the worker holds the run),
synchronous with a bounded wait (the result, or 202 when it has not ended) - read back with
their status, turns, usage and result. All against the scripted model server."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from tests.server.conftest import APPROVAL_FLOW, Api, serve, until

from wovyr.activities.base import ActivityRegistry
from wovyr.activities.policy import TRUSTED
from wovyr.activities.providers import ProviderConfig, Providers
from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.settings import Settings
from wovyr.store.sqlite import SQLiteStore
from wovyr.testing.model_server import ScriptedLLM, text, tool_calls

pytestmark = pytest.mark.anyio
OP, VIEW, B_OP = "tenant-a:operator", "tenant-a:viewer", "tenant-b:operator"
AGENTS = "/api/v1/agents"
YAML = {"Content-Type": "application/yaml"}
ASYNC = {"Prefer": "respond-async"}
AGENT = """\
apiVersion: wovyr/v1
kind: Agent
metadata: {name: helper, version: "1"}
spec:
  model: m1
  instructions: Be brief.
  tools: [greet]
  max_turns: 4
"""


@asynccontextmanager
async def served(
    factory: Callable[..., Any], registry: ActivityRegistry, llm: ScriptedLLM
) -> AsyncIterator[Api]:
    registry.register("greet", lambda name: f"hello {name}")
    async with factory() as api:
        assert isinstance(api, Api)
        providers = Providers({"default": ProviderConfig("default", llm.base_url)})
        # the tenants may reach the model on 127.0.0.1
        api.configure(providers=providers, side_effects=TRUSTED)
        r = await api.call("POST", AGENTS, OP, content=AGENT, headers=YAML)
        assert r.status_code == 201, r.text
        yield api


async def test_apply_list_show_and_bad_documents(
    memory_api_factory: Callable[..., Any], registry: ActivityRegistry
) -> None:
    with ScriptedLLM([text("unused")]) as llm:
        async with served(memory_api_factory, registry, llm) as api:
            again = await api.call("POST", AGENTS, OP, content=AGENT, headers=YAML)
            assert (again.status_code, again.json()["result"]) == (200, "unchanged")
            assert again.headers["Location"] == f"{AGENTS}/helper"
            as_json = {
                "apiVersion": "wovyr/v1",
                "kind": "Agent",
                "metadata": {"name": "helper", "version": "1"},
                "spec": {"model": "m1", "instructions": "Be brief.", "tools": ["greet"],
                         "max_turns": 4},
            }  # fmt: skip
            same = await api.call("POST", AGENTS, OP, json=as_json)
            assert (same.status_code, same.json()["hash"]) == (200, again.json()["hash"])
            changed = await api.call("POST", AGENTS, OP, content=AGENT.replace("4", "5"))
            assert changed.status_code == 415  # no content type
            changed = await api.call(
                "POST", AGENTS, OP, content=AGENT.replace("max_turns: 4", "max_turns: 5"),
                headers=YAML,
            )  # fmt: skip
            assert changed.status_code == 409, changed.text

            bad = AGENT.replace("max_turns: 4", "max_turns: 0\n  toolz: [x]")
            r = await api.call("POST", AGENTS, OP, content=bad, headers=YAML)
            assert r.status_code == 422, r.text
            located = {(p["line"], p["path"]) for p in r.json()["problems"]}
            assert located == {(8, "spec.max_turns"), (9, "spec.toolz")}

            unknown = AGENT.replace("tools: [greet]", "tools: [greet, greet.typo]")
            unknown = unknown.replace('version: "1"', 'version: "2"')
            r = await api.call("POST", AGENTS, OP, content=unknown, headers=YAML)
            assert r.status_code == 422, r.text
            [problem] = r.json()["problems"]
            assert (problem["line"], problem["path"]) == (7, "spec.tools[1]")
            assert "greet.typo" in problem["message"]

            workflow = AGENT.replace("kind: Agent", "kind: Workflow")
            r = await api.call("POST", AGENTS, OP, content=workflow, headers=YAML)
            assert r.status_code == 422 and "not an agent" in r.text

            listed = (await api.call("GET", AGENTS, VIEW)).json()
            assert [(a["name"], a["version"]) for a in listed] == [("helper", "1")]
            shown = (await api.call("GET", f"{AGENTS}/helper", VIEW)).json()
            assert shown["agent"]["spec"] == {
                "model": "m1", "instructions": "Be brief.", "tools": ["greet"], "max_turns": 4,
            }  # fmt: skip
            assert (await api.call("GET", f"{AGENTS}/nobody", VIEW)).status_code == 404
            # another tenant: nothing listed, the agent answers like a missing one
            assert (await api.call("GET", AGENTS, "tenant-b:viewer")).json() == []
            theirs = await api.call("GET", f"{AGENTS}/helper", "tenant-b:viewer")
            missing = await api.call("GET", f"{AGENTS}/nobody", "tenant-b:viewer")
            assert theirs.status_code == missing.status_code == 404
            # an agent is not a workflow that merely has an agent's name
            fake = APPROVAL_FLOW.replace("name: purchase", "name: agent.fake")
            r = await api.call("POST", "/api/v1/definitions", OP, content=fake, headers=YAML)
            assert r.status_code == 201, r.text
            assert (await api.call("GET", f"{AGENTS}/fake", VIEW)).status_code == 404
            assert len((await api.call("GET", AGENTS, VIEW)).json()) == 1


async def test_an_async_run_answers_at_once_and_polling_sees_it_run_then_complete(
    memory_api_factory: Callable[..., Any], registry: ActivityRegistry
) -> None:
    gate = threading.Event()  # the model's answer waits for it
    script = [tool_calls(("greet", {"name": "Ada"}, "c1")), text("Ada is greeted.", gate=gate)]
    with ScriptedLLM(script, pick="turn") as llm:
        async with served(memory_api_factory, registry, llm) as api:
            r = await api.call(
                "POST", f"{AGENTS}/helper/runs", OP, json={"input": "greet Ada"}, headers=ASYNC
            )
            assert r.status_code == 202, r.text
            assert r.headers["Preference-Applied"] == "respond-async"
            location = r.headers["Location"]
            run_id = r.json()["id"]
            assert location == f"{AGENTS}/runs/{run_id}"
            assert r.json()["status"] not in ("completed", "failed") and r.json()["turns"] == 0
            assert llm.completions == []  # answered without the engine running anything

            driving = asyncio.create_task(api.drain())  # the worker holds the run
            await until(lambda: len(llm.completions) == 2)  # the second call waits on the gate
            running = (await api.call("GET", location, VIEW)).json()
            assert (running["status"], running["turns"], running["result"]) == ("running", 1, None)
            assert running["usage"] == {"input_tokens": 10, "output_tokens": 5}
            gate.set()
            await driving
            done = (await api.call("GET", location, VIEW)).json()
            assert (done["status"], done["turns"]) == ("completed", 2)
            assert done["result"]["text"] == "Ada is greeted."
            assert done["result"]["tool_calls"][0]["result"] == "hello Ada"
            assert done["usage"] == {"input_tokens": 20, "output_tokens": 10}
            # a run is an execution: listed with the tenant's executions
            listed = (await api.call("GET", "/api/v1/workflows", VIEW)).json()["items"]
            assert [(e["id"], e["workflow"]) for e in listed] == [(run_id, "agent.helper")]
            # another tenant's run answers like a missing one
            theirs = await api.call("GET", location, "tenant-b:viewer")
            missing = await api.call("GET", f"{AGENTS}/runs/nope", "tenant-b:viewer")
            assert theirs.status_code == missing.status_code == 404
            # an execution that is not an agent's run is not found here
            flow = APPROVAL_FLOW.replace("name: purchase", "name: plain")
            r = await api.call("POST", "/api/v1/workflows", OP, json={"definition": flow})
            plain = await api.call("GET", f"{AGENTS}/runs/{r.json()['id']}", VIEW)
            assert plain.status_code == 404


async def test_a_sync_run_returns_the_result_or_202_when_it_has_not_ended(
    memory_api_factory: Callable[..., Any], registry: ActivityRegistry
) -> None:
    with ScriptedLLM([text("short answer")]) as llm:
        async with served(memory_api_factory, registry, llm) as api:
            # no worker runs it: the bounded wait ends, the run goes on (202 + Location)
            r = await api.call(
                "POST", f"{AGENTS}/helper/runs?wait=0", OP, json={"input": "x", "id": "r0"}
            )
            assert r.status_code == 202, r.text
            assert r.headers["Location"] == f"{AGENTS}/runs/r0"

            stop = asyncio.Event()

            async def worker() -> None:
                while not stop.is_set():
                    await api.drain()
                    await asyncio.sleep(0.01)

            pumping = asyncio.create_task(worker())
            try:
                r = await api.call(
                    "POST", f"{AGENTS}/helper/runs?wait=60", OP, json={"input": {"q": 1}}
                )
            finally:
                stop.set()
                await pumping
            assert r.status_code == 200, r.text
            body = r.json()
            assert (body["status"], body["turns"]) == ("completed", 1)
            assert body["result"]["text"] == "short answer"
            assert r.headers["Content-Location"] == f"{AGENTS}/runs/{body['id']}"
            asked = [c.body["messages"][-1]["content"] for c in llm.completions]
            assert '{"q": 1}' in asked  # a JSON task is sent as its JSON text

            # another tenant cannot run tenant-a's agent: like a missing agent
            theirs = await api.call("POST", f"{AGENTS}/helper/runs", B_OP, json={"input": "x"})
            missing = await api.call("POST", f"{AGENTS}/nobody/runs", B_OP, json={"input": "x"})
            assert theirs.status_code == missing.status_code == 404
            assert "helper" not in theirs.text
            # a run needs a task
            r = await api.call("POST", f"{AGENTS}/helper/runs", OP, json={})
            assert r.status_code == 422, r.text


async def test_a_run_outlives_the_server_that_started_it(
    tmp_path: Path, clock: ManualClock, registry: ActivityRegistry
) -> None:
    """The run is the worker's, not the request's: started on one server over a SQLite
    file, it is completed by the worker of another server opened on the same file."""
    db = tmp_path / "agents.db"
    registry.register("greet", lambda name: f"hello {name}")

    def engine(llm: ScriptedLLM) -> Engine:
        providers = Providers({"default": ProviderConfig("default", llm.base_url)})
        store = SQLiteStore(db)
        return Engine(
            store, clock=clock, activities=registry, providers=providers, side_effects=TRUSTED
        )

    with ScriptedLLM([text("after the restart")]) as llm:
        first = engine(llm)
        async with serve(first, Settings(home=tmp_path / "home")) as api:
            r = await api.call("POST", AGENTS, OP, content=AGENT, headers=YAML)
            assert r.status_code == 201, r.text
            r = await api.call(
                "POST", f"{AGENTS}/helper/runs", OP, json={"input": "q", "id": "r1"}, headers=ASYNC
            )
            assert r.status_code == 202, r.text
        first.close()
        assert llm.completions == []

        second = engine(llm)
        try:
            async with serve(second, Settings(home=tmp_path / "home")) as api:
                waiting = (await api.call("GET", f"{AGENTS}/runs/r1", VIEW)).json()
                assert waiting["status"] == "running" and waiting["result"] is None
                await api.drain()
                done = (await api.call("GET", f"{AGENTS}/runs/r1", VIEW)).json()
                assert (done["status"], done["turns"]) == ("completed", 1)
                assert done["result"]["text"] == "after the restart"
        finally:
            second.close()
        assert len(llm.completions) == 1
