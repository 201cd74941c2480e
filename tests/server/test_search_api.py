"""Search over the API: `labels` in the start body, `label`, `id_prefix` and `name` on the
list; bad labels are a 422 naming the problem; another tenant finds nothing."""

from __future__ import annotations

import pytest
from tests.server.conftest import Api

pytestmark = pytest.mark.anyio
OP, VIEW, OTHER = "tenant-a:operator", "tenant-a:viewer", "tenant-b:viewer"
BASE = "/api/v1/workflows"

FLOW = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: %s}
inputs: {region: {type: string, default: eu}}
labels: {region: "${{ inputs.region }}"}
activities:
  - {id: w, wait: {signal: go}}
"""


async def test_labels_id_prefixes_and_partial_names(api: Api) -> None:
    starts = [
        ("inv-1", "Invoice-Run", {"region": "us"}, {"customer": "acme"}),
        ("inv-2", "invoice-run", {}, {"customer": "acme"}),
        ("pay-1", "payout", {}, {"customer": "globex"}),
    ]
    for ident, name, given, labels in starts:
        body = {"definition": FLOW % name, "id": ident, "input": given, "labels": labels}
        r = await api.call("POST", BASE, OP, json=body)
        assert r.status_code == 201, r.text
        assert r.json()["labels"] == {"region": given.get("region", "eu"), **labels}
        api.clock.advance(1)

    async def listed(query: str, who: str = VIEW) -> list[str]:
        r = await api.call("GET", f"{BASE}?{query}", who)
        assert r.status_code == 200, r.text
        return [i["id"] for i in r.json()["items"]]

    assert await listed("label=customer=acme") == ["inv-2", "inv-1"]
    assert await listed("label=customer=acme&label=region=us") == ["inv-1"]
    assert await listed("id_prefix=pay") == ["pay-1"]
    assert await listed("name=INVOICE") == ["inv-2", "inv-1"]
    assert await listed("name=invoice&limit=1") == ["inv-2"]
    r = await api.call("GET", f"{BASE}?name=invoice&limit=1", VIEW)
    cursor = r.json()["next_cursor"]
    assert await listed(f"name=invoice&limit=1&cursor={cursor}") == ["inv-1"]
    page = (await api.call("GET", f"{BASE}?label=customer=globex", VIEW)).json()
    assert page["items"][0]["labels"] == {"customer": "globex", "region": "eu"}
    assert await listed("label=customer=acme", OTHER) == []
    assert await listed("name=invoice", OTHER) == []
    assert await listed("id_prefix=inv", OTHER) == []

    r = await api.call("GET", f"{BASE}?label=nokey", VIEW)
    assert r.status_code == 422 and "expected KEY=VALUE" in r.text
    body = {"definition": FLOW % "x", "labels": {"bad key": "v"}}
    r = await api.call("POST", BASE, OP, json=body)
    assert r.status_code == 422 and "label key 'bad key' is refused" in r.text
