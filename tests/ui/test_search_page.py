"""Search on the executions list: by partial workflow name (any case), id prefix and labels
(shown as chips on each row and on the execution's page); a bad label filter is a 400 with
the reason; another tenant's executions never show."""

from __future__ import annotations

from wovyr.engine.engine import Engine

from .conftest import Keys, UiClient

FLOW = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: %s}
activities:
  - {id: w, wait: {signal: go}}
"""


def _rows(html: str) -> list[str]:
    return [part.split('"', 1)[0] for part in html.split('data-execution="')[1:]]


def test_search_by_name_id_and_label(client: UiClient, keys: Keys, ui_engine: Engine) -> None:
    acme = ui_engine.for_tenant("acme")
    acme.start(FLOW % "Invoice-Run", execution_id="inv-1", labels={"customer": "acme"})
    acme.start(FLOW % "payout", execution_id="pay-1", labels={"customer": "globex"})
    ui_engine.for_tenant("globex").start(FLOW % "invoice", execution_id="inv-9")
    client.sign_in(keys.viewer_a)

    assert _rows(client.get("/ui?name=INVOICE").text) == ["inv-1"]
    assert _rows(client.get("/ui?id=pay").text) == ["pay-1"]
    page = client.get("/ui?label=customer%3Dglobex")
    assert _rows(page.text) == ["pay-1"]
    assert 'data-label="customer">customer=globex<' in page.text
    assert 'value="customer=globex"' in page.text  # the filter stays in the form
    assert _rows(client.get("/ui?label=customer%3Dacme&name=pay").text) == []
    bad = client.get("/ui?label=nokey")
    assert bad.status_code == 400 and "expected KEY=VALUE" in bad.text
    shown = client.get("/ui/executions/inv-1")
    assert 'href="/ui?label=customer%3Dacme" class="chip label">customer=acme<' in shown.text
