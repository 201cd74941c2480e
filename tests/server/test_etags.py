"""ETag and If-Match on the objects edited from two places (definitions, schedules, a
tenant's policy, providers): a read gives the tag, a write based on an older tag is a 412
that changes nothing, a write on the current tag (or with no If-Match) goes through."""

from __future__ import annotations

import httpx
import pytest
from tests.server.conftest import Api

pytestmark = pytest.mark.anyio
OP, ADMIN, OTHER = "tenant-a:operator", "tenant-a:admin", "tenant-b:admin"
YAML = {"Content-Type": "application/yaml"}
FLOW = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: nightly, version: "%s"}
activities:
  - {id: a, set: {x: 1}}
"""


def stale(r: httpx.Response) -> None:
    assert r.status_code == 412, r.text
    assert r.headers["content-type"] == "application/problem+json"
    assert r.json()["type"] == "urn:wovyr:problem:precondition-failed"


async def test_schedules(api: Api) -> None:
    applied = await api.call("POST", "/api/v1/definitions", OP, content=FLOW % 1, headers=YAML)
    assert applied.status_code == 201, applied.text
    body = {"id": "s", "workflow": "nightly", "every": "1h"}
    created = await api.call("POST", "/api/v1/schedules", OP, json=body)
    assert created.status_code == 201, created.text
    first = created.headers["ETag"]
    read = await api.call("GET", "/api/v1/schedules/s", OP)
    assert read.headers["ETag"] == first
    changed = await api.call(
        "PATCH", "/api/v1/schedules/s", OP, json={"note": "mine"}, headers={"If-Match": first}
    )
    assert changed.status_code == 200, changed.text
    second = changed.headers["ETag"]
    assert second != first
    late = await api.call(
        "PATCH", "/api/v1/schedules/s", OP, json={"note": "theirs"}, headers={"If-Match": first}
    )
    stale(late)
    assert late.headers["ETag"] == second
    assert (await api.call("GET", "/api/v1/schedules/s", OP)).json()["note"] == "mine"
    stale(await api.call("POST", "/api/v1/schedules/s/pause", OP, headers={"If-Match": first}))
    stale(await api.call("DELETE", "/api/v1/schedules/s", OP, headers={"If-Match": first}))
    paused = await api.call("POST", "/api/v1/schedules/s/pause", OP, headers={"If-Match": second})
    assert paused.status_code == 200 and paused.json()["paused"]
    both = f"{first}, {paused.headers['ETag']}"  # a list: any of them
    resumed = await api.call("POST", "/api/v1/schedules/s/resume", OP, headers={"If-Match": both})
    assert resumed.status_code == 200, resumed.text
    gone = await api.call("DELETE", "/api/v1/schedules/s", OP, headers={"If-Match": "*"})
    assert gone.status_code == 204
    # a missing schedule, and another tenant's, is the uniform 404 before any precondition
    missing = await api.call("PATCH", "/api/v1/schedules/s", OP, json={}, headers={"If-Match": "*"})
    assert missing.status_code == 404


async def test_the_policy(api: Api) -> None:
    read = await api.call("GET", "/api/v1/admin/policy", ADMIN)
    tag = read.headers["ETag"]
    tightened = await api.call(
        "PATCH", "/api/v1/admin/policy", ADMIN, json={"shell": False}, headers={"If-Match": tag}
    )
    assert tightened.status_code == 200, tightened.text
    again = await api.call(
        "PATCH",
        "/api/v1/admin/policy",
        ADMIN,
        json={"shell_cpu_seconds": 5},
        headers={"If-Match": tag},
    )
    stale(again)
    now = await api.call("GET", "/api/v1/admin/policy", ADMIN)
    assert now.headers["ETag"] == tightened.headers["ETag"] != tag
    assert now.json() == tightened.json()


async def test_providers(api: Api) -> None:
    path = "/api/v1/providers/acme"
    stale(await api.call("PUT", path, ADMIN, json={"base_url": "https://a.example/v1"},
                         headers={"If-Match": "*"}))  # fmt: skip
    assert (await api.call("GET", path, ADMIN)).status_code == 404  # nothing was created
    made = await api.call("PUT", path, ADMIN, json={"base_url": "https://a.example/v1"})
    assert made.status_code == 200, made.text
    tag = (await api.call("GET", path, ADMIN)).headers["ETag"]
    assert tag == made.headers["ETag"]
    moved = await api.call(
        "PUT", path, ADMIN, json={"base_url": "https://b.example/v1"}, headers={"If-Match": tag}
    )
    assert moved.status_code == 200, moved.text
    stale(await api.call("PUT", path, ADMIN, json={"base_url": "https://c.example/v1"},
                         headers={"If-Match": tag}))  # fmt: skip
    stale(await api.call("DELETE", path, ADMIN, headers={"If-Match": tag}))
    assert (await api.call("GET", path, ADMIN)).json()["base_url"] == "https://b.example/v1"
    # another tenant's tag buys nothing: its provider of that name is its own
    assert (await api.call("GET", path, OTHER)).status_code == 404
    gone = await api.call("DELETE", path, ADMIN, headers={"If-Match": moved.headers["ETag"]})
    assert gone.status_code == 204


async def test_definitions(api: Api) -> None:
    one = await api.call("POST", "/api/v1/definitions", OP, content=FLOW % 1, headers=YAML)
    assert one.status_code == 201, one.text
    tag = (await api.call("GET", "/api/v1/definitions/nightly", OP)).headers["ETag"]
    assert tag == one.headers["ETag"] == f'"{one.json()["hash"]}"'
    two = await api.call(
        "POST", "/api/v1/definitions", OP, content=FLOW % 2, headers={**YAML, "If-Match": tag}
    )
    assert two.status_code == 201, two.text
    three = await api.call(
        "POST", "/api/v1/definitions", OP, content=FLOW % 3, headers={**YAML, "If-Match": tag}
    )
    stale(three)  # version 2 was applied since: 3 was based on 1
    latest = (await api.call("GET", "/api/v1/definitions/nightly", OP)).json()
    assert latest["version"] == "2"
    assert (await api.call("GET", "/api/v1/definitions/nightly/3", OP)).status_code == 404
    other = FLOW.replace("nightly", "fresh") % 1
    stale(await api.call("POST", "/api/v1/definitions", OP, content=other,
                         headers={**YAML, "If-Match": "*"}))  # fmt: skip
