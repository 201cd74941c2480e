"""Rerun in the web UI: a finished execution's page offers a rerun (all, or from each
activity) to an operator only; the rerun's page links back to the original and shows the
reused activities, and the original's page lists its reruns; another tenant gets a 404."""

from __future__ import annotations

import re
from collections.abc import Callable

from wovyr.engine.engine import Engine
from wovyr.testing import drain

from .conftest import Keys, UiClient

FLOW = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: relay}
activities:
  - {id: a, set: {n: 1}}
  - {id: b, needs: [a], set: {n: "${{ activities.a.output.n + 1 }}"}}
  - {id: c, needs: [b], wait: {signal: go}}
"""


def _cancelled(ui_engine: Engine) -> str:
    acme = ui_engine.for_tenant("acme")
    acme.start(FLOW, execution_id="orig")
    drain(ui_engine)
    acme.cancel("orig")
    return "orig"


def test_an_operator_reruns_from_an_activity_and_the_pages_link_both_ways(
    client: UiClient, keys: Keys, ui_engine: Engine
) -> None:
    _cancelled(ui_engine)
    client.sign_in(keys.operator_a)
    page = client.get("/ui/executions/orig")
    assert page.status_code == 200
    assert 'id="rerun-form"' in page.text
    assert len(re.findall(r'class="inline rerun-from"', page.text)) == 3  # one per activity
    token = client.csrf("/ui/executions/orig")

    done = client.post("/ui/executions/orig/rerun", {"csrf_token": token, "from": "c"})
    assert done.status_code == 303
    target = done.headers["location"]
    new_id = target.split("/ui/executions/")[1].split("?")[0]
    assert target.endswith("?notice=rerun") and new_id != "orig"
    rerun = client.get(target)
    assert "Rerun started." in rerun.text
    assert 'href="/ui/executions/orig" id="rerun-of-link">orig<' in rerun.text
    assert rerun.text.count('class="muted small reused"') == 2  # a and b
    assert "a reused the result of orig (not run again)" in rerun.text
    assert 'id="rerun-form"' not in rerun.text  # it runs (waits): nothing to rerun yet
    original = client.get("/ui/executions/orig")
    assert f'href="/ui/executions/{new_id}" class="rerun-link">{new_id}<' in original.text
    assert ui_engine.for_tenant("acme").query(new_id).rerun_of == {"id": "orig", "from": "c"}


def test_a_refused_rerun_shows_the_reason_and_readers_and_strangers_cannot_rerun(
    make_client: Callable[[], UiClient], keys: Keys, ui_engine: Engine
) -> None:
    _cancelled(ui_engine)
    client = make_client()
    client.sign_in(keys.viewer_a)
    page = client.get("/ui/executions/orig")
    assert 'id="rerun-form"' not in page.text and "rerun-from" not in page.text
    token = client.csrf("/ui/executions/orig")
    assert client.post("/ui/executions/orig/rerun", {"csrf_token": token}).status_code == 403

    client = make_client()
    client.sign_in(keys.operator_a)
    token = client.csrf("/ui/executions/orig")
    refused = client.post(
        "/ui/executions/orig/rerun", {"csrf_token": token, "from": "c", "latest": "1"}
    )
    assert refused.status_code == 409  # --latest needs a registered name: said on the page
    assert "cannot rerun on the latest definition: no workflow &#39;relay&#39;" in refused.text

    client = make_client()
    client.sign_in(keys.operator_b)
    token = client.csrf("/ui")
    assert client.post("/ui/executions/orig/rerun", {"csrf_token": token}).status_code == 404
    assert ui_engine.for_tenant("acme").reruns("orig") == []
