"""`/api/v1/definitions`: each tenant's own registry, applied as YAML or JSON, and start by
name and child workflows resolving in the caller's tenant."""

from __future__ import annotations

import sys

import pytest
from tests.server.conftest import Api

pytestmark = pytest.mark.anyio

B = "tenant-b:operator"
KID = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: kid, version: "1"}
inputs: {n: {type: integer}}
activities:
  - {id: double, set: {v: "${{ inputs.n * 2 }}"}}
output: "${{ activities.double.output.v }}"
"""
PARENT = {
    "apiVersion": "wovyr/v1",
    "kind": "Workflow",
    "metadata": {"name": "parent", "version": "1"},
    "activities": [{"id": "k", "workflow": {"name": "kid", "input": {"n": 21}}}],
    "output": "${{ activities.k.output }}",
}
YAML = {"Content-Type": "application/yaml"}


async def apply(api: Api, who: str, body: str | dict[str, object]) -> object:
    if isinstance(body, str):
        return await api.call("POST", "/api/v1/definitions", who, content=body, headers=YAML)
    return await api.call("POST", "/api/v1/definitions", who, json=body)


async def test_apply_yaml_and_json_then_start_by_name_runs_the_child_in_the_tenant(
    api: Api,
) -> None:
    first = await apply(api, B, KID)
    assert first.status_code == 201, first.text
    assert first.json()["result"] == "applied" and first.json()["name"] == "kid"
    assert first.headers["location"] == "/api/v1/definitions/kid/1"
    again = await apply(api, B, KID)
    assert again.status_code == 200 and again.json()["result"] == "unchanged"
    assert (await apply(api, B, PARENT)).status_code == 201

    started = await api.call("POST", "/api/v1/workflows", B, json={"workflow": "parent"})
    assert started.status_code == 201, started.text
    await api.drain()
    view = (await api.call("GET", f"/api/v1/workflows/{started.json()['id']}", B)).json()
    assert (view["status"], view["output"]) == ("completed", 42)

    listed = (await api.call("GET", "/api/v1/definitions", B)).json()
    assert sorted((d["name"], d["version"]) for d in listed) == [("kid", "1"), ("parent", "1")]
    shown = (await api.call("GET", "/api/v1/definitions/parent", B)).json()
    assert shown["definition"]["activities"][0]["workflow"]["name"] == "kid"
    one = await api.call("GET", "/api/v1/definitions/kid/1", "tenant-b:viewer")
    assert one.status_code == 200 and one.json()["hash"] == first.json()["hash"]


async def test_another_tenant_neither_sees_nor_starts_the_names(api: Api) -> None:
    assert (await apply(api, B, KID)).status_code == 201
    a = "tenant-a:operator"
    assert (await api.call("GET", "/api/v1/definitions", a)).json() == []
    theirs = await api.call("GET", "/api/v1/definitions/kid", a)
    missing = await api.call("GET", "/api/v1/definitions/absent", a)
    assert theirs.status_code == missing.status_code == 404
    assert theirs.content == missing.content
    started = await api.call("POST", "/api/v1/workflows", a, json={"workflow": "kid"})
    assert started.status_code == 422 and "no workflow 'kid' is registered" in started.text
    # the same name in tenant a is its own definition
    assert (await apply(api, a, KID.replace("n * 2", "n * 3"))).status_code == 201


async def test_a_changed_document_under_the_same_version_is_a_conflict(api: Api) -> None:
    assert (await apply(api, B, KID)).status_code == 201
    r = await apply(api, B, KID.replace("n * 2", "n * 5"))
    assert r.status_code == 409 and "already applied with different content" in r.text


@pytest.mark.parametrize(
    ("content", "content_type", "status", "says"),
    [
        ("metadata: {name: x}\nactivities: [", "application/yaml", 422, "problems"),
        ("{not json", "application/json", 422, "not valid JSON"),
        ("[1, 2]", "application/json", 422, "workflow object"),
        (b"\xff\xfe", "application/yaml", 422, "not UTF-8"),
        ("name: x", "application/xml", 415, "application/yaml"),
    ],
)
async def test_bad_documents_are_refused_clearly(
    api: Api, content: str | bytes, content_type: str, status: int, says: str
) -> None:
    r = await api.call(
        "POST", "/api/v1/definitions", B, content=content, headers={"Content-Type": content_type}
    )
    assert r.status_code == status, r.text
    assert says in r.text
    assert (await api.call("GET", "/api/v1/definitions", B)).json() == []


async def test_the_tenant_policy_is_checked_when_a_definition_is_applied(api: Api) -> None:
    shell = KID.replace(
        '- {id: double, set: {v: "${{ inputs.n * 2 }}"}}',
        f"- {{id: double, shell: {{argv: [{sys.executable!r}, -c, 'print(1)']}}}}",
    ).replace('output: "${{ activities.double.output.v }}"\n', "")
    r = await apply(api, B, shell)
    assert r.status_code == 422, r.text
    assert "activity 'double' (shell)" in r.text
    assert (await api.call("GET", "/api/v1/definitions", B)).json() == []
