"""`/api/v1/mcp-servers` over the app, on every store: an admin adds, lists, shows and
removes its tenant's MCP servers; answers show a header secret's NAME, never its value (a
canary set as that secret appears in no answer nor the audit chain); another tenant's
server answers like a missing one; a restricted tenant's stdio server is a 422 that stores
nothing; an operator may not manage servers."""

from __future__ import annotations

import json

import pytest
from tests.server.conftest import Api

pytestmark = pytest.mark.anyio

A, B = "tenant-a:admin", "tenant-b:admin"
CANARY = "mcp-api-canary-4f20b9d1"
SERVERS = "/api/v1/mcp-servers"


async def test_add_show_list_remove_and_tenants(api: Api) -> None:
    r = await api.call("PUT", "/api/v1/secrets/WEB_TOKEN", A, json={"value": CANARY})
    assert r.status_code == 200
    body = {"url": "https://mcp.example.com/mcp", "header_secrets": {"X-Token": "WEB_TOKEN"}}
    r = await api.call("PUT", f"{SERVERS}/web", A, json=body)
    assert r.status_code == 200, r.text
    got = r.json()
    assert got["transport"] == "http" and got["header_secrets"] == {"X-Token": "WEB_TOKEN"}
    assert got["updated_by"] == api.key_ids[A]
    answers = [r.text]
    for path in (f"{SERVERS}/web", SERVERS):
        r = await api.call("GET", path, A)
        assert r.status_code == 200
        answers.append(r.text)
    assert [s["name"] for s in json.loads(answers[-1])] == ["web"]
    assert (await api.call("GET", SERVERS, B)).json() == []
    missing = await api.call("GET", f"{SERVERS}/web", B)
    nothing = await api.call("GET", f"{SERVERS}/nothing", B)
    assert missing.status_code == nothing.status_code == 404
    assert (await api.call("DELETE", f"{SERVERS}/web", B)).status_code == 404
    assert (await api.call("DELETE", f"{SERVERS}/web", A)).status_code == 204
    assert (await api.call("GET", f"{SERVERS}/web", A)).status_code == 404
    audit = [
        (r.action, r.target)
        for r in api.engine.store.audit_records()
        if r.tenant == "tenant-a" and r.action.startswith("mcp.")
    ]
    assert audit == [("mcp.add", "web"), ("mcp.remove", "web")]
    chain = json.dumps([r.details for r in api.engine.store.audit_records()], default=str)
    assert all(CANARY not in text for text in [*answers, chain])


async def test_a_restricted_tenants_stdio_server_is_a_422(api: Api) -> None:
    r = await api.call("PUT", f"{SERVERS}/files", A, json={"command": ["python", "-m", "srv"]})
    assert r.status_code == 422, r.text
    assert "may not register a stdio server" in r.text
    assert (await api.call("GET", SERVERS, A)).json() == []


BAD_BODIES = [
    {},
    {"url": "https://x.example/mcp", "command": "x"},
    {"url": "file:///etc/passwd"},
    {"url": "https://x.example/mcp", "header_secrets": {"X-Token": "sk-a-value!"}},
    {"url": "https://x.example/mcp", "extra": 1},
]


async def test_bad_bodies_are_422(api: Api) -> None:
    for body in BAD_BODIES:
        r = await api.call("PUT", f"{SERVERS}/web", A, json=body)
        assert r.status_code == 422, (body, r.text)
    assert (await api.call("GET", SERVERS, A)).json() == []


async def test_only_an_admin_manages_servers(api: Api) -> None:
    body = {"url": "https://x.example/mcp"}
    for who in ("tenant-a:operator", "tenant-a:viewer"):
        assert (await api.call("PUT", f"{SERVERS}/web", who, json=body)).status_code == 403
        assert (await api.call("GET", SERVERS, who)).status_code == 403
