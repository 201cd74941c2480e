"""A tenant's key holders against the host and against what they may not read, over HTTP.

The host's model provider `default` (`WOVYR_LLM_BASE_URL` and `WOVYR_LLM_API_KEY`) runs on
one real scripted model server, the tenant's own provider on another. A tenant may store a
provider named `default` (it comes before the host's for its steps), and may delete it while
one of its agents runs: the host's key goes only to the host's server, whatever the tenant
does and whenever it does it. An operator, who may use the tenant's secrets but not read
them, gets no form of one back through an endpoint that echoes the URL it was called with.
A host's tool that fails inside a library shows the tenant its own frames only, never the
library's or Wovyr's, nor a cause raised inside them; the operator's log has it all. The
store is real (every backend).
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import threading
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from tests.acceptance.test_secrets_canary import forms
from tests.server.conftest import Api, until
from tests.tracebacks import frame_files, wovyr_frames

from wovyr.activities.policy import RESTRICTED
from wovyr.activities.providers import ProviderConfig, Providers
from wovyr.engine.tenants import set_policy
from wovyr.testing.model_server import ScriptedLLM, text, tool_calls

pytestmark = pytest.mark.anyio

ADMIN, OPERATOR = "tenant-b:admin", "tenant-b:operator"
HOST_KEY = "sk-host-canary-5e17c0a9d3"
TENANT_KEY = "sk-tenant-b-own-44f1"
AGENT_FLOW = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: helper}
activities:
  - id: think
    agent: {model: m1, input: "look it up", tools: [lookup], max_turns: 4}
    retry: {max_attempts: 1}
output: "${{ activities.think.output }}"
"""


def host_default(api: Api, url: str) -> None:
    """The host's provider `default`, with the host's key, as `wovyr serve` configures it."""
    host = ProviderConfig("default", url, "m-host", api_key=HOST_KEY)
    api.configure(providers=Providers({"default": host}))


def reach(api: Api, *ports: int) -> None:
    """The host's administrator lets tenant b reach these ports of 127.0.0.1."""
    policy = replace(RESTRICTED, allow_hosts=tuple(f"127.0.0.1:{port}" for port in ports))
    set_policy(api.engine.store, "tenant-b", policy, by="host", at=api.clock.now())


def keys_seen(server: ScriptedLLM) -> list[str | None]:
    return [r.authorization for r in server.requests]


async def test_deleting_a_provider_named_default_mid_run_never_sends_the_host_key(
    api: Api,
) -> None:
    api.engine.activities.register("lookup", lambda: "found")
    gate = threading.Event()  # the tenant's server holds its first answer until it is set
    script = [tool_calls(("lookup", {}, "c1"), gate=gate), text("done")]
    with ScriptedLLM([text("from the host")]) as host, ScriptedLLM(script) as own:
        host_default(api, host.base_url)
        reach(api, host.port, own.port)
        put = await api.call("PUT", "/api/v1/secrets/OWN_KEY", ADMIN, json={"value": TENANT_KEY})
        assert put.status_code == 200, put.text
        body = {"base_url": own.base_url, "api_key_secret": "OWN_KEY", "default_model": "m1"}
        r = await api.call("PUT", "/api/v1/providers/default", ADMIN, json=body)
        assert r.status_code == 200, r.text
        r = await api.call("POST", "/api/v1/workflows", OPERATOR, json={"definition": AGENT_FLOW})
        assert r.status_code == 201, r.text
        eid = r.json()["id"]

        driving = asyncio.create_task(api.drain())
        await until(lambda: len(own.completions) == 1)  # the first call is in flight
        gone = await api.call("DELETE", "/api/v1/providers/default", ADMIN)
        assert gone.status_code == 204, gone.text
        gate.set()
        await driving

        assert HOST_KEY not in repr(keys_seen(own))
        assert keys_seen(own) == [f"Bearer {TENANT_KEY}"] * 2  # the attempt's own provider
        view = (await api.call("GET", f"/api/v1/workflows/{eid}", OPERATOR)).json()
        assert view["status"] == "completed", view["activities"]["think"]
        assert view["output"]["text"] == "done"
        assert host.requests == []

        # the next run has no provider `default` of its own: the host's, with the host's key
        r = await api.call("POST", "/api/v1/workflows", OPERATOR, json={"definition": AGENT_FLOW})
        await api.drain()
        view = (await api.call("GET", f"/api/v1/workflows/{r.json()['id']}", OPERATOR)).json()
        assert view["output"]["text"] == "from the host", view["activities"]["think"]
        assert keys_seen(host) == [f"Bearer {HOST_KEY}"]
        assert len(own.requests) == 2


async def test_a_tenant_provider_named_default_without_a_key_gets_no_key(api: Api) -> None:
    api.engine.activities.register("lookup", lambda: "found")
    with ScriptedLLM([text("from the host")]) as host, ScriptedLLM([text("mine")]) as own:
        host_default(api, host.base_url)
        reach(api, host.port, own.port)
        body = {"base_url": own.base_url, "default_model": "m1"}
        r = await api.call("PUT", "/api/v1/providers/default", ADMIN, json=body)
        assert r.status_code == 200, r.text
        r = await api.call("POST", "/api/v1/workflows", OPERATOR, json={"definition": AGENT_FLOW})
        assert r.status_code == 201, r.text
        await api.drain()

        view = (await api.call("GET", f"/api/v1/workflows/{r.json()['id']}", OPERATOR)).json()
        assert view["status"] == "completed", view["activities"]["think"]
        assert keys_seen(own) == [None]
        assert host.requests == []


class _Echo(BaseHTTPRequestHandler):
    """Answers with the path it was asked for, in its body and a `Location` header."""

    def do_GET(self) -> None:
        body = json.dumps({"you_asked_for": self.path}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Location", self.path)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def echo() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


async def test_an_operator_gets_no_form_of_a_secret_back_from_an_echoing_url(
    api: Api, echo: ThreadingHTTPServer
) -> None:
    secret = 'tk-77f0/+"&=a b{c}`ü'  # what each URL part encodes differently
    port = echo.server_address[1]
    reach(api, port)
    put = await api.call("PUT", "/api/v1/secrets/TOKEN", ADMIN, json={"value": secret})
    assert put.status_code == 200, put.text
    flow = f"""\
apiVersion: wovyr/v1
kind: Workflow
metadata: {{name: echo}}
activities:
  - id: get
    http:
      url: "http://127.0.0.1:{port}/v1/${{{{ secrets.TOKEN }}}}/x"
      query: {{t: "${{{{ secrets.TOKEN }}}}"}}
    retry: {{max_attempts: 1}}
"""
    r = await api.call("POST", "/api/v1/workflows", OPERATOR, json={"definition": flow})
    assert r.status_code == 201, r.text
    await api.drain()

    eid = r.json()["id"]
    shown = await api.call("GET", f"/api/v1/workflows/{eid}", OPERATOR)
    history = await api.call("GET", f"/api/v1/workflows/{eid}/history", OPERATOR)
    output = shown.json()["activities"]["get"]["output"]
    assert output["status"] == 200, shown.text
    assert output["json"]["you_asked_for"] == "/v1/***/x?t=***"  # it was there: masked
    for answer in (shown.text, history.text):
        assert [f for f in forms(secret) if f in answer] == []
        assert "a%20b" not in answer and "a+b" not in answer  # its URL encodings neither


def _resolve(name: str) -> str:
    try:
        return str(ipaddress.ip_address(name))  # raises inside the standard library
    except ValueError as exc:
        raise LookupError(f"no address for {name!r}") from exc


def _parse(text: str) -> object:
    return json.loads(text)  # raises inside the standard library


def host_tools(api: Api) -> None:
    """Tools the host offers every tenant, as a host's own module would define them."""
    api.engine.activities.register("host.resolve", _resolve)
    api.engine.activities.register("host.parse", _parse)


async def test_a_tenant_sees_only_the_tools_own_frames_and_the_operator_all(
    api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    host_tools(api)
    caplog.set_level(logging.INFO, logger="wovyr")
    flow = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: probe}
activities:
  - {id: resolve, tool: host.resolve, with: {name: db.internal}, retry: {max_attempts: 1}}
  - {id: parse, tool: host.parse, with: {text: "{oops"}, retry: {max_attempts: 1}}
"""
    r = await api.call("POST", "/api/v1/workflows", OPERATOR, json={"definition": flow})
    assert r.status_code == 201, r.text
    await api.drain()

    eid = r.json()["id"]
    detail = (await api.call("GET", f"/api/v1/workflows/{eid}", OPERATOR)).json()
    logs = (await api.call("GET", f"/api/v1/workflows/{eid}/logs", OPERATOR)).json()
    history = await api.call("GET", f"/api/v1/workflows/{eid}/history", OPERATOR)
    resolve = detail["activities"]["resolve"]["error"]
    parse = detail["activities"]["parse"]["error"]
    assert resolve["type"] == "LookupError" and resolve["message"] == "no address for 'db.internal'"
    assert parse["type"] == "JSONDecodeError"
    traces = [resolve["traceback"], parse["traceback"]]
    traces += [item["traceback"] for item in logs["items"]]
    assert len(traces) == 4
    here = Path(__file__).resolve()
    for trace in traces:
        assert trace.startswith("Traceback (most recent call last):\n"), trace
        assert frame_files(trace) and set(frame_files(trace)) == {here}, trace
        assert wovyr_frames(trace) == []
    assert "in _resolve\n" in traces[0] and "ipaddress" not in traces[0]  # nor its cause
    assert "does not appear to be an IPv4 or IPv6 address" not in history.text
    assert "decoder.py" not in history.text and "ipaddress.py" not in history.text

    # the operator's log holds each failure whole: the library frames and the cause
    logged = "\n".join(r.getMessage() + "\n" + (r.exc_text or "") for r in caplog.records)
    assert "ipaddress.py" in logged and "does not appear to be an IPv4" in logged
    assert "decoder.py" in logged and eid in logged
