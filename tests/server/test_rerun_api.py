"""Rerun over the API: `POST /workflows/{id}/rerun` starts a linked execution (shown both
ways), reuses the results upstream of `from`, refuses an incompatible `latest` with the
reason (409), needs an operator, and another tenant's execution answers 404."""

from __future__ import annotations

import pytest
from tests.server.conftest import Api

pytestmark = pytest.mark.anyio
OP, VIEW, OTHER = "tenant-a:operator", "tenant-a:viewer", "tenant-b:operator"
BASE = "/api/v1/workflows"

FLOW = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: relay, version: "%s"}
inputs: {n: {type: integer, default: 1}}
activities:
  - {id: a, set: {n: "${{ inputs.n }}"}}
  - {id: b, needs: [a], %s}
  - {id: c, needs: [b], wait: {signal: go}}
  - {id: d, needs: [c], set: {n: "${{ activities.b.output.n + 1 }}"}}
output: "${{ activities.d.output }}"
"""
B_SET = 'set: {n: "${{ activities.a.output.n * 10 }}"}'


async def test_rerun_from_an_activity_links_both_ways(api: Api) -> None:
    api.engine.for_tenant("tenant-a").apply(FLOW % ("1", B_SET))
    r = await api.call("POST", BASE, OP, json={"workflow": "relay", "input": {"n": 2}, "id": "o"})
    assert r.status_code == 201, r.text
    await api.drain()
    assert (await api.call("POST", f"{BASE}/o/cancel", OP)).status_code == 200

    r = await api.call("POST", f"{BASE}/o/rerun", VIEW, json={"from": "c"})
    assert r.status_code == 403  # a viewer may not start anything
    r = await api.call("POST", f"{BASE}/o/rerun", OTHER, json={"from": "c"})
    assert r.status_code == 404  # another tenant's execution is a missing one
    r = await api.call("POST", f"{BASE}/o/rerun", OP, json={"from": "c", "id": "o2"})
    assert r.status_code == 201, r.text
    body = r.json()
    assert r.headers["Location"] == f"{BASE}/o2"
    assert body["rerun_of"] == {"id": "o", "from": "c"}
    reused = {k for k, v in body["activities"].items() if v["reused_from"] == "o"}
    assert reused == {"a", "b"}
    assert body["activities"]["b"]["output"] == {"n": 20}
    assert [e["type"] for e in body["timeline"]][1:3] == ["ActivityReused", "ActivityReused"]
    await api.drain()
    assert (await api.call("POST", f"{BASE}/o2/signal", OP, json={"name": "go"})).is_success
    await api.drain()
    done = (await api.call("GET", f"{BASE}/o2", VIEW)).json()
    assert (done["status"], done["output"]) == ("completed", {"n": 21})
    original = (await api.call("GET", f"{BASE}/o", VIEW)).json()
    assert original["reruns"] == ["o2"]
    assert (await api.call("GET", f"{BASE}/o", "tenant-b:viewer")).status_code == 404


async def test_an_incompatible_latest_is_refused_with_the_reason(api: Api) -> None:
    engine = api.engine.for_tenant("tenant-a")
    engine.apply(FLOW % ("1", B_SET))
    await api.call("POST", BASE, OP, json={"workflow": "relay", "id": "p"})
    await api.drain()
    await api.call("POST", f"{BASE}/p/cancel", OP)
    engine.apply(FLOW % ("2", "wait: {signal: b}"))
    r = await api.call("POST", f"{BASE}/p/rerun", OP, json={"from": "c", "latest": True})
    assert r.status_code == 409, r.text
    assert "activity 'b' is a 'wait' activity in relay v2" in r.text
    r = await api.call("POST", f"{BASE}/p/rerun", OP, json={"from": "nope"})
    assert r.status_code == 422 and "has no activity 'nope'" in r.text
    r = await api.call("POST", f"{BASE}/p/rerun", OP, json={"form": "c"})
    assert r.status_code == 422  # an unknown field is refused, not ignored
