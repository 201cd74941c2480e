"""The HTTP API and flow control: `priority` on a start (checked 0-9), and what an
execution waiting for a concurrency slot shows (its key, the holders, the queue)."""

from __future__ import annotations

from typing import Any

import pytest
from tests.server.conftest import Api

pytestmark = pytest.mark.anyio
OP, VIEW = "tenant-a:operator", "tenant-a:viewer"
BASE = "/api/v1/workflows"
KEYED = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: keyed}
inputs:
  customer: {type: string, required: true}
concurrency: {key: "cust-${{ inputs.customer }}", limit: 1}
activities:
  - {id: go, wait: {signal: go}}
"""


async def test_priority_and_a_concurrency_wait_over_the_api(api: Api) -> None:
    body: dict[str, Any] = {"definition": KEYED, "input": {"customer": "c1"}, "id": "k1"}
    r = await api.call("POST", BASE, OP, json={**body, "priority": 7})
    assert r.status_code == 201, r.text
    assert r.json()["priority"] == 7
    r = await api.call("POST", BASE, OP, json={**body, "id": "k2"})
    assert r.status_code == 201, r.text
    view = (await api.call("GET", f"{BASE}/k2", VIEW)).json()
    assert view["status"] == "waiting" and view["waiting_on"] == "concurrency cust-c1"
    assert view["concurrency"]["holders"] == ["k1"]
    assert view["concurrency"]["waiting"] == ["k2"]
    assert view["priority"] == 0
    r = await api.call("POST", BASE, OP, json={**body, "id": "k3", "priority": 10})
    assert r.status_code == 422
    # another tenant's same key is its own
    r = await api.call("POST", BASE, "tenant-b:operator", json={**body, "id": "b1"})
    assert r.status_code == 201 and r.json()["status"] == "running"
