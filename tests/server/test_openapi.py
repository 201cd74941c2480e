"""The OpenAPI document: the committed copy (docs/openapi.json) is what the server serves,
so every API change is a reviewed change; operation ids are stable camelCase names; errors
are one Problem schema behind shared responses; cancel is `POST .../cancel`."""

from __future__ import annotations

import difflib
import json
import re
from pathlib import Path
from typing import Any

import pytest
from tests.server.conftest import Api

from wovyr.server.api.openapi import RESPONSE_NAMES, document_text

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "docs" / "openapi.json"
BASE = "/api/v1/workflows"
OP = "tenant-a:operator"

pytestmark = pytest.mark.anyio
FLOW = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: waits}
activities:
  - {id: gate, wait: {signal: go}}
"""


def operations(doc: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(m.upper(), p, op) for p, ops in doc["paths"].items() for m, op in ops.items()]


async def test_the_served_document_is_the_committed_copy(api: Api) -> None:
    served = document_text(api.app)
    committed = COMMITTED.read_text(encoding="utf-8")
    if served != committed:
        diff = difflib.unified_diff(
            committed.splitlines(), served.splitlines(), "docs/openapi.json", "served", n=2
        )
        raise AssertionError(
            "the API changed: review the diff, then run `python scripts/openapi.py`\n"
            + "\n".join(list(diff)[:80])
        )


async def test_operation_ids_are_unique_camel_case(api: Api) -> None:
    doc = (await api.call("GET", "/openapi.json")).json()
    ids = [op["operationId"] for _, _, op in operations(doc)]
    assert len(ids) == len(set(ids))
    assert all(re.fullmatch(r"[a-z][a-zA-Z0-9]*", i) for i in ids), ids
    assert {"startWorkflow", "listExecutions", "cancelExecution", "getExecution"} <= set(ids)


async def test_every_operation_says_what_it_does(api: Api) -> None:
    doc = (await api.call("GET", "/openapi.json")).json()
    health = {"/healthz", "/readyz", "/metrics"}  # their summaries say it all
    for method, path, op in operations(doc):
        assert op.get("summary"), (method, path)
        if path not in health:
            assert op.get("description"), (method, path)
        body = op.get("requestBody", {}).get("content", {}).get("application/json")
        if body and "$ref" in body["schema"]:
            name = body["schema"]["$ref"].rsplit("/", 1)[1]
            assert doc["components"]["schemas"][name].get("examples"), (method, path, name)


async def test_errors_are_one_problem_schema_behind_shared_responses(api: Api) -> None:
    doc = (await api.call("GET", "/openapi.json")).json()
    shared = doc["components"]["responses"]
    for method, path, op in operations(doc):
        if path == "/readyz":  # its 503 is the readiness report, not a problem
            continue
        for code, response in op["responses"].items():
            if code.isdigit() and int(code) >= 400:
                ref = f"#/components/responses/{RESPONSE_NAMES[int(code)]}"
                assert response == {"$ref": ref}, (method, path, code)
    assert "HTTPValidationError" not in doc["components"]["schemas"]
    text = json.dumps(doc)
    assert text.count('"application/problem+json"') == len(shared)  # the schema once each
    assert text.count('"required": ["type", "title", "status", "detail"]') == 1
    for name in ("TooManyRequests", "Unavailable"):
        if name in shared:
            assert "Retry-After" in shared[name]["headers"]


async def test_cancel_is_a_post_and_delete_points_to_it(api: Api) -> None:
    r = await api.call("POST", BASE, OP, json={"definition": FLOW, "id": "c1"})
    assert r.status_code == 201, r.text
    moved = await api.call("DELETE", f"{BASE}/c1", OP)
    assert moved.status_code == 405
    assert moved.headers["content-type"] == "application/problem+json"
    assert f"POST {BASE}/c1/cancel" in moved.json()["detail"]
    assert moved.headers["Allow"] == "GET"
    assert (await api.call("GET", f"{BASE}/c1", OP)).json()["status"] != "cancelled"
    done = await api.call("POST", f"{BASE}/c1/cancel", OP)  # no body: no reason
    assert done.status_code == 200, done.text
    assert done.json()["status"] == "cancelled"
