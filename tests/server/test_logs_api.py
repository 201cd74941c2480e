"""`GET /workflows/{id}/logs`: the attempts that logged or failed, with their lines and the
handler's traceback; `after_seq` reads only newer ones; another tenant gets a 404."""

from __future__ import annotations

import pytest
from tests.server.conftest import Api

from wovyr.activities.base import ActivityContext, ActivityRegistry

pytestmark = pytest.mark.anyio
OP, VIEW, OTHER = "tenant-a:operator", "tenant-a:viewer", "tenant-b:viewer"
BASE = "/api/v1/workflows"
FLOW = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: logs}
activities:
  - {id: flaky, tool: api.flaky, retry: {max_attempts: 2, initial_interval: 0}}
  - {id: gate, needs: [flaky], wait: {signal: go}}
"""


@pytest.fixture(autouse=True)
def tools(registry: ActivityRegistry) -> None:
    def flaky(ctx: ActivityContext) -> str:
        ctx.log.warning("attempt %d starting", ctx.attempt)
        if ctx.attempt == 1:
            raise ValueError("first one fails")
        return "ok"

    registry.register("api.flaky", flaky)


async def test_logs_of_each_attempt_and_its_traceback(api: Api) -> None:
    r = await api.call("POST", BASE, OP, json={"definition": FLOW, "id": "l1"})
    assert r.status_code == 201, r.text
    await api.drain()
    body = (await api.call("GET", f"{BASE}/l1/logs", VIEW)).json()
    assert body["finished"] is False
    first, second = body["items"]
    assert (first["attempt"], first["outcome"]) == (1, "retrying")
    assert first["lines"][0]["message"] == "attempt 1 starting"
    assert first["lines"][0]["level"] == "warning"
    assert first["error"] == {"type": "ValueError", "message": "first one fails"}
    assert "raise ValueError" in first["traceback"]
    assert (second["attempt"], second["outcome"], second["traceback"]) == (2, "completed", None)
    newer = (await api.call("GET", f"{BASE}/l1/logs?after_seq={first['seq']}", VIEW)).json()
    assert [i["attempt"] for i in newer["items"]] == [2]
    assert (await api.call("GET", f"{BASE}/l1/logs", OTHER)).status_code == 404
    await api.call("POST", f"{BASE}/l1/signal", OP, json={"name": "go"})
    await api.drain()
    assert (await api.call("GET", f"{BASE}/l1/logs", VIEW)).json()["finished"] is True
