"""The execution read paths encode plain dicts themselves (`wovyr.server.api.workflows`):
their bodies are exactly what pydantic's encoder writes for their response models, with
values orjson takes and with values only the fallback takes (integers beyond 64 bits)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel
from tests.server.conftest import Api

from wovyr.server.api.models import ExecutionDetail, ExecutionPage

pytestmark = pytest.mark.anyio
OP, VIEW = "tenant-a:operator", "tenant-a:viewer"
BASE = "/api/v1/workflows"
FLOW = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: echo}
inputs: {v: {type: object}}
activities:
  - id: copy
    set: {echo: "${{ inputs }}"}
  - id: each
    for_each: "${{ [1, 2, 3] }}"
    set: {n: "${{ item }}"}
  - id: hold
    needs: [copy, each]
    wait: {signal: go}
"""
VALUES: dict[str, Any] = {
    "text": 'écrit, 書く, 🙂, \u2028, </script>, "quoted" \\ \t',
    "floats": [0.1, 1.5e20, -2.0, 1e-7],
    "nested": {"a": [1, None, True, {"b": {}}], "": []},
    "long": "y" * 3000,  # listed as a preview
}


def pydantic_bytes(model: type[BaseModel], body: bytes) -> bytes:
    """What pydantic's encoder writes for the model of `body` (which must validate)."""
    return model.model_validate_json(body).model_dump_json().encode()


@pytest.mark.parametrize("extra", [{}, {"huge": 2**70}], ids=["orjson", "fallback"])
async def test_reads_are_the_bytes_pydantic_writes(api: Api, extra: dict[str, Any]) -> None:
    body = {"definition": FLOW, "input": {"v": {**VALUES, **extra}}, "labels": {"team": "é"}}
    started = await api.call("POST", BASE, OP, json=body)
    assert started.status_code == 201, started.text
    assert started.content == pydantic_bytes(ExecutionDetail, started.content)
    eid = started.json()["id"]
    await api.drain()
    one = await api.call("GET", f"{BASE}/{eid}", VIEW)
    assert one.json()["activities"]["each"]["items_total"] == 3
    assert one.json()["timeline"][0]["at"].endswith("Z")
    assert one.content == pydantic_bytes(ExecutionDetail, one.content)
    listed = await api.call("GET", BASE, VIEW)
    item = listed.json()["items"][0]
    assert item["id"] == eid and item["input"]["truncated"] and item["created_at"].endswith("Z")
    assert listed.content == pydantic_bytes(ExecutionPage, listed.content)
    signalled = await api.call("POST", f"{BASE}/{eid}/signal", OP, json={"name": "go"})
    assert signalled.status_code == 200
    assert signalled.content == pydantic_bytes(ExecutionDetail, signalled.content)
