"""An agent's tool call in `require_approval` is decided over the HTTP API like any
approval: the execution waits, an operator approves or denies with a comment, the loop goes
on (the model sees a denial and its comment). The provider's key (a canary) is in no API
answer and no log record."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
from tests.server.conftest import Api

from wovyr.activities.base import ActivityRegistry
from wovyr.activities.policy import TRUSTED
from wovyr.activities.providers import ProviderConfig, Providers
from wovyr.testing.model_server import ScriptedLLM, text, tool_calls

pytestmark = pytest.mark.anyio
OP, VIEW = "tenant-a:operator", "tenant-a:viewer"
BASE = "/api/v1/workflows"
KEY = "sk-canary-api-3c8e"
FLOW = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: mailer}
activities:
  - id: think
    agent:
      model: m1
      input: Mail a and b.
      tools: [mail.send]
      require_approval: [mail.send]
output: "${{ activities.think.output.text }}"
"""


async def test_agent_tool_approvals_over_the_api(
    memory_api_factory: Callable[..., Any],
    registry: ActivityRegistry,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    answers: list[str] = []
    sent: list[str] = []

    def send(to: str) -> str:
        sent.append(to)
        return f"sent to {to}"

    registry.register("mail.send", send)
    script = [
        tool_calls(("mail_send", {"to": "a@x"}, "c1")),
        tool_calls(("mail_send", {"to": "b@x"}, "c2")),
        text("done"),
    ]
    with ScriptedLLM(script, pick="turn") as llm:
        async with memory_api_factory() as api:
            assert isinstance(api, Api)
            provider = ProviderConfig("default", llm.base_url, api_key=KEY)
            # tenant-a may reach the model on 127.0.0.1
            api.configure(providers=Providers({"default": provider}), side_effects=TRUSTED)
            r = await api.call("POST", BASE, OP, json={"definition": FLOW})
            assert r.status_code in (200, 201), r.text
            eid = r.json()["id"]
            await api.drain()
            view = (await api.call("GET", f"{BASE}/{eid}", VIEW)).json()
            assert view["status"] == "waiting"
            assert view["activities"]["think"]["wait"]["tool"] == "mail.send"

            r = await api.call("POST", f"{BASE}/{eid}/approve", OP, json={"activity": "think"})
            assert r.status_code == 200, r.text
            await api.drain()
            assert sent == ["a@x"]

            body = {"activity": "think", "approved": False, "comment": "not b"}
            r = await api.call("POST", f"{BASE}/{eid}/approve", OP, json=body)
            assert r.status_code == 200, r.text
            await api.drain()
            r = await api.call("GET", f"{BASE}/{eid}", VIEW)
            answers.append(r.text)
            view = r.json()
            assert (view["status"], view["output"]) == ("completed", "done")
            r = await api.call("GET", f"{BASE}/{eid}/history", VIEW)
            assert r.status_code == 200 and "ModelCallCompleted" in r.text
            answers.append(r.text)
            assert sent == ["a@x"]
            told = [m for m in llm.completions[2].body["messages"] if m["role"] == "tool"]
            assert told[-1]["content"] == (
                "error: ApprovalDenied: tenant-a-operator denied this call: not b"
            )
            assert all(r.authorization == f"Bearer {KEY}" for r in llm.completions)
    assert answers and all(KEY not in answer for answer in answers)
    assert KEY not in caplog.text


BUDGETED = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: spender}
activities:
  - id: think
    agent:
      model: m1
      input: Work.
      tools: [note.add]
      budget: {tokens: 60, on_exhausted: approval}
output: "${{ activities.think.output.text }}"
"""


async def test_more_budget_is_granted_over_the_api(
    memory_api_factory: Callable[..., Any], registry: ActivityRegistry
) -> None:
    registry.register("note.add", lambda text: "noted")
    script = [
        tool_calls(("note_add", {"text": "a"}, "c1"), usage=(40, 10)),
        tool_calls(("note_add", {"text": "b"}, "c2"), usage=(40, 10)),
        text("done", usage=(40, 10)),
    ]
    with ScriptedLLM(script, pick="turn") as llm:
        async with memory_api_factory() as api:
            assert isinstance(api, Api)
            providers = Providers({"default": ProviderConfig("default", llm.base_url)})
            api.configure(providers=providers, side_effects=TRUSTED)
            r = await api.call("POST", BASE, OP, json={"definition": BUDGETED})
            eid = r.json()["id"]
            await api.drain()
            wait = (await api.call("GET", f"{BASE}/{eid}", VIEW)).json()["activities"]["think"]
            assert (wait["wait"]["reason"], wait["wait"]["turn"]) == ("budget", 2)

            bad = {"activity": "think", "grant": {"tokens": 0}}
            r = await api.call("POST", f"{BASE}/{eid}/approve", OP, json=bad)
            assert r.status_code == 422, r.text
            r = await api.call("POST", f"{BASE}/{eid}/approve", VIEW, json=bad)
            assert r.status_code == 403, r.text

            body = {"activity": "think", "grant": {"tokens": 100}}
            r = await api.call("POST", f"{BASE}/{eid}/approve", OP, json=body)
            assert r.status_code == 200, r.text
            await api.drain()
            view = (await api.call("GET", f"{BASE}/{eid}", VIEW)).json()
            assert (view["status"], view["output"]) == ("completed", "done")
            assert len(llm.completions) == 3
