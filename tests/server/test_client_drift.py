"""The clients against the server's OpenAPI document: every operation has a client method
and every method an operation (the table below, both ways), each method sends the
parameters and body fields the operation declares (no more, none missing), and the typed
answers have the keys of the response schemas. A route added, renamed or given a new
parameter without its client method fails here."""

# ruff: noqa: C408 - each call's keyword arguments written as in the call itself

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, get_type_hints

import httpx
import pytest

from wovyr.client import AsyncClient, Client
from wovyr.client import models as m
from wovyr.engine.engine import Engine
from wovyr.server import create_app
from wovyr.settings import Settings
from wovyr.store.sqlite import SQLiteStore

ROOT = Path(__file__).resolve().parents[2]

# operationId -> the client method (the ids are wovyr.server.api.openapi's)
OPERATIONS = {
    "startWorkflow": "start_workflow",
    "listExecutions": "list_workflows",
    "getExecution": "get_workflow",
    "cancelExecution": "cancel_workflow",
    "getExecutionHistory": "get_history",
    "listExecutionItems": "get_items",
    "streamExecution": "stream_workflow",
    "getExecutionLogs": "get_logs",
    "signalExecution": "signal_workflow",
    "queryExecution": "query_workflow",
    "approveExecution": "approve_workflow",
    "rerunExecution": "rerun_workflow",
    "submitBatch": "submit_batch",
    "listBatches": "list_batches",
    "getBatch": "get_batch",
    "listDefinitions": "list_definitions",
    "applyDefinition": "apply_definition",
    "getDefinition": "get_definition",
    "getDefinitionVersion": "get_definition",
    "listAgents": "list_agents",
    "applyAgent": "apply_agent",
    "getAgentRun": "get_agent_run",
    "getAgent": "get_agent",
    "runAgent": "run_agent",
    "listMemoryItems": "list_memory",
    "getMemoryItem": "get_memory",
    "deleteMemoryItem": "delete_memory",
    "listSchedules": "list_schedules",
    "createSchedule": "create_schedule",
    "getSchedule": "get_schedule",
    "updateSchedule": "update_schedule",
    "deleteSchedule": "delete_schedule",
    "pauseSchedule": "pause_schedule",
    "resumeSchedule": "resume_schedule",
    "triggerSchedule": "trigger_schedule",
    "backfillSchedule": "backfill_schedule",
    "listKeys": "list_keys",
    "createKey": "create_key",
    "revokeKey": "revoke_key",
    "getPolicy": "get_policy",
    "tightenPolicy": "tighten_policy",
    "getQuotas": "get_quotas",
    "lowerQuotas": "lower_quotas",
    "getRetention": "get_retention",
    "setRetention": "set_retention",
    "listLimits": "list_limits",
    "getLimit": "get_limit",
    "putLimit": "put_limit",
    "deleteLimit": "delete_limit",
    "getFlowState": "flow_state",
    "listSecrets": "list_secrets",
    "getSecret": "get_secret",
    "putSecret": "put_secret",
    "deleteSecret": "delete_secret",
    "listProviders": "list_providers",
    "getProvider": "get_provider",
    "putProvider": "put_provider",
    "deleteProvider": "delete_provider",
    "listMcpServers": "list_mcp_servers",
    "getMcpServer": "get_mcp_server",
    "putMcpServer": "put_mcp_server",
    "deleteMcpServer": "delete_mcp_server",
    "listAuditRecords": "list_audit",
    "applyTrigger": "apply_trigger",
    "listTriggers": "list_triggers",
    "getTrigger": "get_trigger",
    "deleteTrigger": "delete_trigger",
    "sendEvent": "send_event",
    "receiveWebhook": "receive_webhook",
    "listEvents": "list_events",
    "putArtifactBytes": "put_artifact",
    "getArtifactBytes": "get_artifact",
    "listStoredArtifacts": "list_artifacts",
    "listWebhooks": "list_webhooks",
    "getWebhook": "get_webhook",
    "putWebhook": "put_webhook",
    "deleteWebhook": "delete_webhook",
    "listDeliveries": "list_deliveries",
    "getDelivery": "get_delivery",
    "healthz": "healthz",
    "readyz": "readyz",
    "getMetrics": "metrics",
}

# One call of each method with every optional argument given: (method, args, kwargs).
CALLS: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
    (
        "start_workflow",
        ("apiVersion: wovyr/v1",),
        dict(
            workflow="w", version="1", input={"a": 1}, id="e1", labels={"k": "v"},
            priority=3, idempotency_key="key-1",
            traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            tracestate="vendor=1",
        ),
    ),
    (
        "list_workflows",
        (),
        dict(
            workflow="w", status="running", created_after="2026-01-01T00:00:00Z",
            created_before="2027-01-01T00:00:00Z", limit=5, cursor="c", labels={"k": "v"},
            id_prefix="e", name="w",
        ),
    ),
    ("get_workflow", ("e1",), dict(events=3, follow=False)),
    ("cancel_workflow", ("e1",), dict(reason="why")),
    ("get_history", ("e1",), dict(after_seq=2, limit=10, follow=False, cursor="Mw")),
    ("get_items", ("e1", "fan"), dict(start=2, limit=10, follow=False, cursor="Mw")),
    ("stream_workflow", ("e1",), dict(after="1-0")),
    ("get_logs", ("e1",), dict(after_seq=2, follow=False, cursor="Mw")),
    ("signal_workflow", ("e1", "go"), dict(payload=[1], definition="kind: Workflow")),
    ("query_workflow", ("e1", "progress"), dict(args={"x": 1})),
    (
        "approve_workflow",
        ("e1", "gate"),
        dict(
            approved=False,
            comment="no",
            grant_tokens=10,
            grant_cost=0.5,
            definition={"kind": "Workflow"},
        ),
    ),
    ("rerun_workflow", ("e1",), dict(start_from="a", input={"x": 1}, latest=True, id="e2")),
    (
        "submit_batch",
        ("signal",),
        dict(
            status="waiting", workflow="w", labels={"k": "v"}, id_prefix="e",
            since="2026-01-01T00:00:00Z", until="2027-01-01T00:00:00Z", signal="go",
            payload=[1], idempotency_key="b-1",
        ),
    ),
    ("list_batches", (), dict(limit=5, cursor="c")),
    ("get_batch", ("b1",), dict(after=3, limit=10, outcome="error", cursor="Mw")),
    ("list_definitions", (), {}),
    ("apply_definition", ("kind: Workflow",), dict(if_match="*")),
    ("get_definition", ("flow",), {}),
    ("get_definition", ("flow", "2"), {}),
    ("list_agents", (), {}),
    ("apply_agent", ({"kind": "Agent"},), {}),
    ("get_agent_run", ("r1",), {}),
    ("get_agent", ("helper",), dict(version="1")),
    ("run_agent", ("helper", "task"), dict(id="r1", wait=1.5, respond_async=True)),
    ("list_memory", ("notes",), dict(prefix="a", after="a1", limit=10, cursor="ImEyIg")),
    ("get_memory", ("notes", "a1"), {}),
    ("delete_memory", ("notes", "a1"), {}),
    ("list_schedules", (), {}),
    (
        "create_schedule",
        ("s1",),
        dict(
            workflow="w", definition="kind: Workflow", cron="* * * * *", every="1m",
            timezone="UTC", offset="5s", overlap="skip", catchup_window="1m", input={"a": 1},
            start_at="2026-01-01T00:00:00Z", end_at="2027-01-01T00:00:00Z",
            remaining_actions=3, paused=True, note="n", priority=2,
        ),
    ),
    ("get_schedule", ("s1",), {}),
    (
        "update_schedule",
        ("s1",),
        dict(
            cron="* * * * *", every="1m", timezone="UTC", offset="5s", overlap="skip",
            catchup_window="1m", input={"a": 1}, note="n", end_at="2027-01-01T00:00:00Z",
            remaining_actions=3, if_match="*",
        ),
    ),
    ("delete_schedule", ("s1",), dict(if_match="*")),
    ("pause_schedule", ("s1",), dict(note="n", if_match="*")),
    ("resume_schedule", ("s1",), dict(note="n", if_match="*")),
    ("trigger_schedule", ("s1",), {}),
    ("backfill_schedule", ("s1", "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z"), {}),
    ("list_keys", (), {}),
    ("create_key", ("viewer",), dict(name="ci")),
    ("revoke_key", ("k1",), {}),
    ("get_policy", (), {}),
    ("tighten_policy", ({"shell": False},), dict(if_match="*")),
    ("get_quotas", (), {}),
    ("lower_quotas", ({"executions_per_day": 5},), {}),
    ("get_retention", (), {}),
    ("set_retention", (90,), dict(workflows={"nightly": 7})),
    ("list_limits", (), {}),
    ("get_limit", ("openai",), {}),
    ("put_limit", ("openai", 500), dict(per=60, burst=50)),
    ("delete_limit", ("openai",), {}),
    ("flow_state", (), {}),
    ("list_secrets", (), {}),
    ("get_secret", ("TOKEN",), {}),
    ("put_secret", ("TOKEN", "s3cret"), {}),
    ("delete_secret", ("TOKEN",), {}),
    ("list_providers", (), {}),
    ("get_provider", ("p",), {}),
    ("put_provider", ("p", {"base_url": "http://x"}), dict(if_match="*")),
    ("delete_provider", ("p",), dict(if_match="*")),
    ("list_mcp_servers", (), {}),
    ("apply_trigger", ("kind: Trigger",), {}),
    ("list_triggers", (), {}),
    ("get_trigger", ("t",), {}),
    ("delete_trigger", ("t",), {}),
    ("send_event", ("orders", {"order": 1}), {}),
    ("receive_webhook", ("hk_1", b"{}", "t=1,v1=ab"), {}),
    ("list_events", (), dict(trigger="t", limit=5, cursor="c")),
    ("put_artifact", (b"\x89PNG", "image/png"), {}),
    ("get_artifact", ("sha256:" + "a" * 64,), {}),
    ("list_artifacts", (), dict(limit=5, cursor="c")),
    ("list_webhooks", (), {}),
    ("get_webhook", ("w",), {}),
    ("put_webhook", ("w", {"url": "https://x", "events": ["e"], "secrets": ["K"]}), {}),
    ("delete_webhook", ("w",), {}),
    ("list_deliveries", (), dict(endpoint="w", status="dead", limit=5, cursor="c")),
    ("get_delivery", ("dlv_1",), {}),
    ("get_mcp_server", ("m",), {}),
    ("put_mcp_server", ("m", {"url": "http://x"}), {}),
    ("delete_mcp_server", ("m",), {}),
    ("list_audit", (), dict(after=1, since="2026-01-01T00:00:00Z", limit=10, cursor="Mw")),
    ("healthz", (), {}),
    ("readyz", (), {}),
    ("metrics", (), {}),
]  # fmt: skip

# Parameters a method may leave out on purpose, with why.
NOT_SENT = {
    # the stream position goes as the Last-Event-ID header; `after` is its stand-in for
    # clients that cannot set headers (browsers' EventSource)
    ("stream_workflow", "after"),
}
# Answers typed by a model of wovyr.client.models: method -> (model, response schema name)
TYPED = {
    "start_workflow": (m.Execution, "ExecutionDetail"),
    "get_workflow": (m.Execution, "ExecutionDetail"),
    "list_workflows": (m.ExecutionPage, "ExecutionPage"),
    "get_history": (m.HistoryPage, "HistoryPage"),
    "get_items": (m.ItemsPage, "ItemsPage"),
    "get_logs": (m.AttemptLogs, "AttemptLogs"),
    "create_schedule": (m.Schedule, "ScheduleOut"),
    "list_schedules": (m.ScheduleList, "ScheduleList"),
    "trigger_schedule": (m.TriggerResult, "TriggerResult"),
    "backfill_schedule": (m.BackfillResult, "BackfillResult"),
    "apply_definition": (m.DefinitionApplied, "DefinitionApplied"),
    "list_definitions": (m.DefinitionOut, "DefinitionOut"),
    "get_definition": (m.DefinitionDetail, "DefinitionDetail"),
}
NESTED = {  # models inside models: (model, schema name)
    (m.ExecutionSummary, "ExecutionSummary"),
    (m.Event, "EventOut"),
    (m.Payload, "Payload"),
}
NOT_METHODS = {"close", "aclose", "base_url"}
# Methods built on the operations (tests/server/test_client_live.py), not operations
HELPERS = {"wait_for_result", "iter_workflows", "iter_history", "iter_batches", "iter_audit"}


@pytest.fixture(scope="module")
def openapi(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    home = tmp_path_factory.mktemp("home")
    with Engine(SQLiteStore()) as engine:
        app = create_app(engine, Settings(home=home), start_background=False)
        return app.openapi()


def operations(openapi: dict[str, Any]) -> dict[str, tuple[str, str, dict[str, Any]]]:
    """operationId -> (METHOD, path template, operation)"""
    out = {}
    for path, ops in openapi["paths"].items():
        for method, op in ops.items():
            out[op["operationId"]] = (method.upper(), path, op)
    return out


def public_methods(cls: type) -> set[str]:
    return {n for n in vars(cls) if not n.startswith("_") and n not in NOT_METHODS | HELPERS}


def test_every_operation_has_a_method_and_every_method_an_operation(
    openapi: dict[str, Any],
) -> None:
    assert set(OPERATIONS) == set(operations(openapi))
    assert set(OPERATIONS.values()) == public_methods(Client) == public_methods(AsyncClient)
    assert {name for name, _, _ in CALLS} == public_methods(Client)


def _answer(request: httpx.Request) -> httpx.Response:
    if request.url.path.endswith("/stream"):
        body = 'id: 1-0\nevent: end\ndata: {"status": "completed"}\n\n'
        return httpx.Response(200, text=body, headers={"content-type": "text/event-stream"})
    if request.url.path == "/metrics":
        return httpx.Response(200, text="# metrics\n")
    return httpx.Response(200, json={})


def sent_requests() -> list[tuple[str, httpx.Request]]:
    """Each CALLS entry made through the blocking client, and the request it sent."""
    seen: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        request.read()
        seen.append(request)
        return _answer(request)

    out = []
    with Client("http://wovyr.test", api_key="k", transport=httpx.MockTransport(record)) as c:
        for name, args, kwargs in CALLS:
            result = getattr(c, name)(*args, **kwargs)
            if name == "stream_workflow":
                list(result)
            out.append((name, seen[-1]))
    return out


def _route(ops: dict[str, tuple[str, str, dict[str, Any]]], request: httpx.Request) -> str:
    matches = []
    for op_id, (method, template, _) in ops.items():
        pattern = "^" + re.sub(r"\\{[^}]+\\}", "[^/]+", re.escape(template)) + "$"
        if method == request.method and re.match(pattern, request.url.path):
            matches.append((template.count("{"), op_id))
    assert matches, f"{request.method} {request.url.path} is no operation"
    return min(matches)[1]  # /agents/runs/{id} before /agents/{agent}/...: fewest variables


def _schema(openapi: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    for option in schema.get("anyOf", [schema]):
        if "$ref" in option:
            name = option["$ref"].rsplit("/", 1)[1]
            found: dict[str, Any] = openapi["components"]["schemas"][name]
            return found
    return schema


def test_each_method_sends_what_its_operation_declares(openapi: dict[str, Any]) -> None:
    ops = operations(openapi)
    reached = set()
    for name, request in sent_requests():
        op_id = _route(ops, request)
        assert OPERATIONS[op_id] == name, (name, op_id)
        reached.add(op_id)
        op = ops[op_id][2]
        declared = {(p["in"], p["name"].lower()) for p in op.get("parameters", [])}
        sent = {("query", k.lower()) for k in request.url.params}
        sent |= {("header", k.lower()) for k in request.headers} & {
            (w, n) for w, n in declared if w == "header"
        }
        sent |= {p for p in declared if p[0] == "path"}  # the route matched
        expected = {p for p in declared if (name, p[1]) not in NOT_SENT}
        assert sent == expected, name
        body = op.get("requestBody")
        if body is None:
            assert request.content == b"", name
            continue
        kind = request.headers.get("content-type", "").split(";")[0]
        assert kind in body["content"], (name, kind)
        if kind != "application/json":
            continue
        schema = _schema(openapi, body["content"][kind]["schema"])
        data = json.loads(request.content)
        assert isinstance(data, dict), name
        if "properties" in schema:
            assert set(data) == set(schema["properties"]), name
    assert reached == set(ops)


def test_typed_answers_have_the_keys_of_the_response_schemas(openapi: dict[str, Any]) -> None:
    schemas = openapi["components"]["schemas"]
    pairs = set(NESTED) | set(TYPED.values())
    for model, schema_name in pairs:
        keys = set(get_type_hints(model))
        assert keys == set(schemas[schema_name]["properties"]), (model, schema_name)
    ops = operations(openapi)
    for op_id, name in OPERATIONS.items():
        if name not in TYPED:
            continue
        op = ops[op_id][2]
        ok = next(v for k, v in op["responses"].items() if k.startswith("2"))
        schema = ok["content"]["application/json"]["schema"]
        ref = schema.get("$ref") or schema.get("items", {}).get("$ref")
        assert ref.rsplit("/", 1)[1] == TYPED[name][1], name


def test_the_async_client_sends_the_same_requests() -> None:
    """AsyncClient is generated to match; its requests are the blocking client's."""
    sync = [(n, r.method, str(r.url), r.content) for n, r in sent_requests()]
    seen: list[httpx.Request] = []

    async def record(request: httpx.Request) -> httpx.Response:
        await request.aread()
        seen.append(request)
        return _answer(request)

    async def run() -> list[tuple[str, str, str, bytes]]:
        out = []
        transport = httpx.MockTransport(record)
        async with AsyncClient("http://wovyr.test", api_key="k", transport=transport) as c:
            for name, args, kwargs in CALLS:
                if name == "stream_workflow":
                    [x async for x in c.stream_workflow(*args, **kwargs)]
                else:
                    await getattr(c, name)(*args, **kwargs)
                r = seen[-1]
                out.append((name, r.method, str(r.url), r.content))
        return out

    assert asyncio.run(run()) == sync


def test_the_blocking_client_is_generated_from_the_async_one() -> None:
    script = ROOT / "scripts" / "unasync_client.py"
    done = subprocess.run(
        [sys.executable, str(script), "--check"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
