"""A failed handler's traceback over the API: in the activity's error and the execution's
error of the detail, and in the failure event of the history, for a viewer of the tenant."""

from __future__ import annotations

import pytest
from tests.server.conftest import Api
from tests.tracebacks import wovyr_frames

from wovyr.activities.base import ActivityRegistry

pytestmark = pytest.mark.anyio
OP, VIEW = "tenant-a:operator", "tenant-a:viewer"
BASE = "/api/v1/workflows"

FLOW = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: charge}
activities:
  - id: charge
    tool: api.charge
    with: {amount: 500}
    retry: {max_attempts: 1}
"""


def _over_limit(amount: int) -> None:
    raise ValueError(f"amount {amount} is over the limit")


@pytest.fixture
def charging(registry: ActivityRegistry) -> None:
    @registry.activity("api.charge")
    def charge(amount: int) -> None:
        _over_limit(amount)


@pytest.mark.usefixtures("charging")
async def test_the_detail_and_the_history_carry_the_handlers_traceback(api: Api) -> None:
    r = await api.call("POST", BASE, OP, json={"definition": FLOW})
    assert r.status_code == 201, r.text
    eid = r.json()["id"]
    await api.drain()
    detail = (await api.call("GET", f"{BASE}/{eid}", VIEW)).json()
    assert detail["status"] == "failed"
    trace = detail["activities"]["charge"]["error"]["traceback"]
    assert trace.startswith("Traceback (most recent call last):\n")
    assert "in charge\n" in trace and "in _over_limit\n" in trace
    assert wovyr_frames(trace) == []  # no frame of the project's package
    assert trace.rstrip().endswith("ValueError: amount 500 is over the limit")
    assert detail["error"]["error"]["traceback"] == trace
    history = (await api.call("GET", f"{BASE}/{eid}/history", VIEW)).json()
    failed = [e for e in history["items"] if e["type"] == "ActivityFailed"]
    assert [e["data"]["error"]["traceback"] for e in failed] == [trace]
