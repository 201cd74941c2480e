"""The MCP client end to end against a real MCP server built with the official SDK
(`wovyr.testing.mcp_server`, as a stdio subprocess and as a streamable-HTTP server process): the
`mcp` activity calls a tool; an `agent` is offered a server's tools with the schemas the
server lists and calls them through the scripted model (one server process for the
attempt's listing and calls), each call recorded as a
`ToolCallCompleted`; the tenant's side-effect policy governs (a restricted
tenant cannot register a stdio server, nor reach one registered before, nor a loopback
http server unless the host allow-lists its host:port, and then reaches it by an `mcp` step
and an agent alike); a header secret is sent to the server and is nowhere in the store."""

from __future__ import annotations

import hashlib
import json
import logging
import socket
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from wovyr.activities.base import ActivityRegistry
from wovyr.activities.policy import RESTRICTED, TRUSTED
from wovyr.activities.providers import ProviderConfig, Providers
from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.engine.tenants import set_policy
from wovyr.errors import InputError
from wovyr.platform.kms import Kms, RootKey
from wovyr.platform.mcp import add_mcp_server, parse_mcp_server
from wovyr.platform.secrets import Secrets
from wovyr.store.platform import McpServerRecord
from wovyr.store.sqlite import SQLiteStore
from wovyr.testing import drain
from wovyr.testing.mcp_server import FakeMCPServer
from wovyr.testing.model_server import ScriptedLLM, text, tool_calls

T0 = datetime(2030, 1, 1, 9, tzinfo=UTC)
CANARY = "mcp-canary-7d41c9e05b"

CALL = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: call}
inputs: {a: {type: number}}
activities:
  - id: sum
    mcp: {server: calc, tool: add, arguments: {a: "${{ inputs.a }}", b: 3}}
    retry: {max_attempts: 2, initial_interval: 0s}
output: "${{ activities.sum.output }}"
"""


def _engine(db: Path, **kw: Any) -> Engine:
    store = SQLiteStore(db)
    secrets = Secrets(store, Kms(RootKey(bytes.fromhex("cd" * 32)), "production"))
    return Engine(
        store, clock=ManualClock(T0), activities=ActivityRegistry(), secrets=secrets, **kw
    )


@pytest.fixture
def fake() -> Iterator[FakeMCPServer]:
    with FakeMCPServer() as server:  # its built-in tools, over stdio
        yield server


def test_an_mcp_activity_calls_a_stdio_servers_tool(tmp_path: Path, fake: FakeMCPServer) -> None:
    engine = _engine(tmp_path / "w.db")
    fake.register(engine, "calc")
    engine.start(CALL, {"a": 2}, execution_id="e1")
    drain(engine)
    view = engine.query("e1")
    assert view.status == "completed", view.activities["sum"]
    assert view.output["structured_content"] == {"result": 5}
    assert view.output["text"] == "5"
    assert view.output["is_error"] is False


def test_a_tool_error_and_an_unknown_server_fail_clearly(
    tmp_path: Path, fake: FakeMCPServer
) -> None:
    engine = _engine(tmp_path / "w.db")
    fake.register(engine, "calc")
    engine.start(CALL.replace("tool: add", "tool: fail"), {"a": 1}, execution_id="e1")
    engine.start(CALL.replace("server: calc", "server: nope"), {"a": 1}, execution_id="e2")
    drain(engine)
    failed = engine.query("e1").activities["sum"]["error"]
    assert failed["type"] == "McpToolError"
    assert "this tool always fails" in failed["message"]
    unknown = engine.query("e2").activities["sum"]
    assert unknown["error"]["type"] == "UnknownMcpServer"
    assert "wovyr mcp add nope" in unknown["error"]["message"]
    assert unknown["attempt"] == 1  # not retried


AGENT = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: helper}
activities:
  - id: think
    agent:
      model: m1
      input: Add 2 and 3, then note it.
      tools: ["mcp:calc/add", "mcp:calc/record"]
output: "${{ activities.think.output }}"
"""


def test_an_agent_calls_mcp_tools_offered_with_the_servers_schemas(
    tmp_path: Path, fake: FakeMCPServer
) -> None:
    script = [
        tool_calls(("calc_add", {"a": 2, "b": 3}), ("calc_record", {"note": "five"})),
        tool_calls(
            ("calc_whoami", {}), ("calc_record", {"note": "again"})
        ),  # whoami: listed, not allowed
        text("2 + 3 = 5, noted."),
    ]
    with ScriptedLLM(script, pick="turn") as llm:
        provider = ProviderConfig("default", llm.base_url)
        engine = _engine(
            tmp_path / "w.db", providers=Providers({"default": provider}), side_effects=TRUSTED
        )
        fake.register(engine, "calc")
        engine.start(AGENT, execution_id="e1")
        drain(engine)
        view = engine.query("e1")
        assert view.status == "completed", view.activities["think"]
        assert view.output["text"] == "2 + 3 = 5, noted."
        offered = {t["function"]["name"]: t["function"] for t in llm.completions[0].body["tools"]}
        assert set(offered) == {"calc_add", "calc_record"}
        assert offered["calc_add"]["description"] == "Add two numbers."
        assert offered["calc_add"]["parameters"]["required"] == ["a", "b"]
        second = llm.completions[1].body["messages"]
        sent = {m["tool_call_id"]: m["content"] for m in second if m["role"] == "tool"}
        assert sent == {"call_0": '{"result": 5}', "call_1": '{"result": "noted five"}'}
        third = llm.completions[2].body["messages"]
        refused = [m["content"] for m in third if m["role"] == "tool"][-2]
        assert "there is no tool 'calc_whoami'" in refused
    events = [e.data for e in engine.history("e1") if e.type == "ToolCallCompleted"]
    events = sorted(events[:2], key=lambda e: e["call_id"]) + events[2:]  # run concurrently
    assert [e["tool"] for e in events[:2]] == ["mcp:calc/add", "mcp:calc/record"]
    assert events[0]["arguments"] == {"a": 2, "b": 3}
    assert events[0]["result"] == {"result": 5}
    made = [c for c in fake.calls if c.tool == "record"]
    assert [c.arguments for c in made] == [{"note": "five"}, {"note": "again"}]  # each once
    assert len({c.pid for c in fake.calls}) == 1  # one server process for the attempt's calls


def test_a_restricted_tenant_cannot_register_a_stdio_server(
    tmp_path: Path, fake: FakeMCPServer
) -> None:
    engine = _engine(tmp_path / "w.db").for_tenant("acme")  # no policy set: restricted
    with pytest.raises(InputError) as caught:
        fake.register(engine, "calc")
    message = str(caught.value)
    assert "may not register a stdio server" in message
    assert "shell: false" in message
    assert engine.store.list_mcp_servers("acme") == []
    # an http server it may register (its address is checked at each call)
    record = parse_mcp_server(
        "acme", "web", {"url": "https://mcp.example.com/mcp"}, policy=RESTRICTED, by="t", at=T0
    )
    assert record.transport == "http"


def test_a_stdio_server_stored_before_a_tightening_is_refused_at_the_call(
    tmp_path: Path, fake: FakeMCPServer
) -> None:
    engine = _engine(tmp_path / "w.db").for_tenant("acme")
    command = tuple(fake.command)
    engine.store.put_mcp_server(McpServerRecord("acme", "calc", "stdio", command, None, {}, T0))
    flow = CALL.replace("tool: add", "tool: record").replace(
        'arguments: {a: "${{ inputs.a }}", b: 3}', "arguments: {note: x}"
    )
    engine.start(flow, {"a": 1}, execution_id="e1")
    drain(engine)
    act = engine.query("e1").activities["sum"]
    assert act["error"]["type"] == "PolicyDenied", act
    assert act["attempt"] == 1
    assert fake.calls == []  # nothing was started


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def http_server() -> Iterator[str]:
    with FakeMCPServer(transport="http") as server:
        yield server.url


WHOAMI = CALL.replace("tool: add", "tool: whoami").replace(
    'arguments: {a: "${{ inputs.a }}", b: 3}', "arguments: {}"
)


def test_an_http_server_gets_its_header_secret_which_is_stored_nowhere(
    tmp_path: Path, http_server: str, caplog: pytest.LogCaptureFixture, tls_builds: list[object]
) -> None:
    caplog.set_level(logging.DEBUG)
    db = tmp_path / "w.db"
    engine = _engine(db, side_effects=TRUSTED)
    assert engine.secrets is not None
    engine.secrets.set_secret(engine.tenant, "CANARY", CANARY, by="test", at=T0)
    fields = {"url": http_server, "header_secrets": {"X-Canary": "CANARY"}}
    record = parse_mcp_server(engine.tenant, "calc", fields, policy=TRUSTED, by="t", at=T0)
    add_mcp_server(engine.store, record)
    dead = {
        "url": f"http://127.0.0.1:{_free_port()}/mcp",
        "header_secrets": fields["header_secrets"],
    }
    record = parse_mcp_server(engine.tenant, "dead", dead, policy=TRUSTED, by="t", at=T0)
    add_mcp_server(engine.store, record)
    engine.start(WHOAMI, {"a": 1}, execution_id="e1")
    engine.start(CALL, {"a": 4}, execution_id="e2")
    engine.start(CALL.replace("server: calc", "server: dead"), {"a": 4}, execution_id="e3")
    drain(engine)
    failed = engine.query("e3").activities["sum"]["error"]
    assert failed["type"] == "McpUnavailable", failed
    view = engine.query("e1")
    assert view.status == "completed", view.activities["sum"]
    assert view.output["text"] == hashlib.sha256(CANARY.encode()).hexdigest()
    assert engine.query("e2").output["structured_content"] == {"result": 7}
    for run in ("e1", "e2", "e3"):
        assert CANARY not in json.dumps([e.data for e in engine.history(run)], default=str)
    assert CANARY not in caplog.text
    assert tls_builds == []  # each call's client used the process's TLS context
    engine.close()
    for path in tmp_path.iterdir():
        if path.name.startswith("w.db"):
            assert CANARY.encode() not in path.read_bytes(), path.name


def test_a_tenant_without_private_network_cannot_reach_a_loopback_server(
    tmp_path: Path, http_server: str
) -> None:
    engine = _engine(tmp_path / "w.db").for_tenant("acme")  # restricted: no private network
    record = parse_mcp_server(
        "acme", "calc", {"url": http_server}, policy=RESTRICTED, by="t", at=T0
    )
    add_mcp_server(engine.store, record)
    engine.start(CALL, {"a": 1}, execution_id="e1")
    drain(engine)
    act = engine.query("e1").activities["sum"]
    assert act["error"]["type"] == "TargetUnreachable", act
    assert act["attempt"] == 1  # refused by the policy: not retried


def test_another_tenants_server_is_unknown_at_dispatch(tmp_path: Path, fake: FakeMCPServer) -> None:
    engine = _engine(tmp_path / "w.db", side_effects=TRUSTED)
    fake.register(engine, "calc")  # tenant default's
    other = engine.for_tenant("beta")
    other.start(CALL, {"a": 1}, execution_id="b1")
    drain(engine)
    act = other.query("b1").activities["sum"]
    assert act["error"]["type"] == "UnknownMcpServer", act
    assert "registered: none" in act["error"]["message"]


def test_a_restricted_tenant_reaches_an_http_server_its_policy_allows(
    tmp_path: Path, http_server: str, tls_builds: list[object]
) -> None:
    # The host's administrator allow-lists the loopback servers' host:port for tenant acme
    # (the MCP server's, and the model's for the agent), whose policy is otherwise
    # restricted (no private network): every request of the `mcp` step and of the agent's
    # session goes through the pinned transport.
    script = [tool_calls(("calc_add", {"a": 2, "b": 3})), text("5")]
    with ScriptedLLM(script, pick="turn") as llm:
        hosts = (urlsplit(http_server).netloc, urlsplit(llm.base_url).netloc)
        allowed = replace(RESTRICTED, allow_hosts=hosts)
        provider = ProviderConfig("default", llm.base_url)
        engine = _engine(tmp_path / "w.db", providers=Providers({"default": provider}))
        engine = engine.for_tenant("acme")
        set_policy(engine.store, "acme", allowed, by="admin", at=T0)
        record = parse_mcp_server(
            "acme", "calc", {"url": http_server}, policy=allowed, by="t", at=T0
        )
        add_mcp_server(engine.store, record)
        engine.start(CALL, {"a": 1}, execution_id="e1")
        engine.start(AGENT.replace('"mcp:calc/record"', ""), execution_id="e2")
        drain(engine)
    view = engine.query("e1")
    assert view.status == "completed", view.activities["sum"]["error"]
    assert view.output["structured_content"] == {"result": 4}
    agent = engine.query("e2")
    assert agent.status == "completed", agent.activities["think"]["error"]
    calls = [e.data for e in engine.history("e2") if e.type == "ToolCallCompleted"]
    assert [(c["tool"], c["result"]) for c in calls] == [("mcp:calc/add", {"result": 5})]
    assert tls_builds == []  # the pinned transport used the process's TLS context
    # another port of the same host is not allowed: refused before anything is sent
    other = f"http://127.0.0.1:{_free_port()}/mcp"
    record = parse_mcp_server("acme", "other", {"url": other}, policy=allowed, by="t", at=T0)
    add_mcp_server(engine.store, record)
    engine.start(CALL.replace("server: calc", "server: other"), {"a": 1}, execution_id="e3")
    drain(engine)
    refused = engine.query("e3").activities["sum"]
    assert refused["error"]["type"] == "TargetUnreachable", refused
