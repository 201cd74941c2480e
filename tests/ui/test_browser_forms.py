"""The start form, applying a definition, the workers page and an agent's sub-steps in a
real headless Chromium (Debian's `chromium`, driven by Playwright) against a real uvicorn
server over a SQLite file: an operator starts a definition from its generated form (a
refused value shown at its field, then fixed), an admin applies a pasted document and an
uploaded one (its problems at their lines), the workers page shows the server's own worker,
and an agent run shows its model and tool calls as sub-steps. Without Chromium or
Playwright this skips locally and FAILS when CI=true (tests/ui/test_browser.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.ui.test_browser import (
    ARTIFACTS,
    CHROMIUM,
    CHROMIUM_ARGS,
    DEADLINE,
    LiveServer,
    _wait_until,
    live_server,
    serving,
    sync_api,
)

from wovyr.activities.base import ActivityRegistry
from wovyr.activities.policy import TRUSTED
from wovyr.activities.providers import ProviderConfig, Providers
from wovyr.engine.engine import Engine
from wovyr.store.sqlite import SQLiteStore
from wovyr.testing.model_server import ScriptedLLM, text, tool_calls

__all__ = ["live_server", "sync_api"]  # the fixtures, shared with test_browser.py

pytestmark = pytest.mark.slow

ORDER = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: order, version: "1"}
inputs:
  customer: {type: string, required: true}
  quantity: {type: integer, default: 1}
  tier: {type: string, enum: [gold, silver], default: silver}
  items: {type: array, default: []}
activities:
  - {id: total, set: {n: "${{ inputs.quantity }}", lines: "${{ size(inputs.items) }}"}}
output: {n: "${{ activities.total.output.n }}", tier: "${{ inputs.tier }}"}
"""
AGENT = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: helper}
activities:
  - id: think
    agent:
      model: m1
      instructions: Use the tools.
      input: Where is Paris?
      tools: [geo.lookup]
output: "${{ activities.think.output.text }}"
"""


REFUSED = "Failed to load resource: the server responded with a status of 400 (Bad Request)"


class Browser:
    """One Chromium page that records script errors; `sign_in` on the login page."""

    def __init__(self, pw: Any, url: str) -> None:
        self.url = url
        self.browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        self.page = self.browser.new_page(viewport={"width": 1280, "height": 900})
        self.page.set_default_timeout(DEADLINE * 1000)
        self.problems: list[str] = []
        self.page.on(
            "console", lambda m: self.problems.append(m.text) if m.type == "error" else None
        )
        self.page.on("pageerror", lambda exc: self.problems.append(str(exc)))

    def sign_in(self, key: str, path: str = "/ui") -> None:
        self.page.context.clear_cookies()
        self.page.goto(f"{self.url}{path}")
        self.page.fill("#api_key", key)
        self.page.click("button[type=submit]")
        self.page.wait_for_load_state()

    def close(self) -> None:
        self.browser.close()


def test_an_operator_starts_a_definition_from_its_form(
    sync_api: Any, live_server: LiveServer
) -> None:
    engine = live_server.engine.for_tenant("acme")
    engine.apply(ORDER)
    _, operator = live_server.authenticator.create_key("acme", "operator", "olga")
    _, viewer = live_server.authenticator.create_key("acme", "viewer", "vic")
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_api.sync_playwright() as pw:
        b = Browser(pw, live_server.url)
        try:
            b.sign_in(viewer, "/ui/definitions/order")
            assert b.page.locator("#start-form").count() == 0
            assert "may view this definition but not start it" in b.page.inner_text("main")

            b.sign_in(operator, "/ui/definitions")
            b.page.click('tr[data-definition="order"] a')
            form = b.page.locator("#start-form")
            assert form.locator("#in-quantity").input_value() == "1"  # its default
            assert form.locator("#in-tier").input_value() == "silver"
            assert form.locator("#in-customer").get_attribute("required") is not None
            form.locator("#in-customer").fill("ada")
            form.locator("#in-tier").select_option("gold")
            form.locator("#in-items").fill("[1, 2")  # not JSON: refused at its field
            form.locator("button[type=submit]").click()
            b.page.wait_for_selector("#err-items")
            assert "not valid JSON" in b.page.inner_text("#err-items")
            assert b.page.locator("#in-customer").input_value() == "ada"  # kept
            assert b.page.locator("#in-tier").input_value() == "gold"
            b.page.screenshot(path=str(ARTIFACTS / "ui-start-refused.png"), full_page=True)

            b.page.fill("#in-items", "[1, 2]")
            b.page.click("#start-form button[type=submit]")
            b.page.wait_for_selector(".flash.ok")
            assert "Execution started." in b.page.inner_text(".flash.ok")
            b.page.wait_for_selector("#execution-status.status-completed")
            execution_id = b.page.url.split("/ui/executions/")[1].split("?")[0]
            b.page.screenshot(path=str(ARTIFACTS / "ui-started.png"), full_page=True)
            assert b.problems == [REFUSED]  # the refused form's answer, and nothing else
        finally:
            b.close()
    view = engine.query(execution_id)
    assert view.input == {"customer": "ada", "quantity": 1, "tier": "gold", "items": [1, 2]}
    assert view.output == {"n": 1, "tier": "gold"}


def test_an_admin_applies_a_pasted_and_an_uploaded_definition(
    sync_api: Any, live_server: LiveServer, tmp_path: Path
) -> None:
    _, admin = live_server.authenticator.create_key("acme", "admin", "ann")
    _, operator = live_server.authenticator.create_key("acme", "operator", "otto")
    broken = tmp_path / "broken.yaml"
    broken.write_text(ORDER.replace('version: "1"', 'version: "2"').replace("set:", "sett:"))
    with sync_api.sync_playwright() as pw:
        b = Browser(pw, live_server.url)
        try:
            b.sign_in(operator, "/ui/definitions")
            assert b.page.locator("#apply-form").count() == 0

            b.sign_in(admin, "/ui/definitions")
            b.page.click("#apply summary")
            b.page.fill("#apply-document", ORDER)
            b.page.click("#apply-form button[type=submit]")
            b.page.wait_for_selector(".flash.ok")
            assert "Definition applied." in b.page.inner_text(".flash.ok")
            assert b.page.url.endswith("/ui/definitions/order?version=1&notice=applied")

            b.page.goto(f"{live_server.url}/ui/definitions")
            b.page.click("#apply summary")
            upload = b.page.locator("input[type=file][data-read-into]")
            assert upload.is_visible()  # shown by the script
            upload.set_input_files(str(broken))
            _wait_until(lambda: "sett:" in b.page.input_value("#apply-document"), "the file's text")
            b.page.click("#apply-form button[type=submit]")
            b.page.wait_for_selector("#apply .flash.error")
            said = b.page.inner_text("#apply")
            assert "line 10, column" in said and "sett" in said
            b.page.screenshot(path=str(tmp_path / "ui-apply-refused.png"), full_page=True)
            assert b.problems == [REFUSED]  # the refused form's answer, and nothing else
        finally:
            b.close()
    store = live_server.engine.store
    assert [r.version for r in store.list_registered("acme")] == ["1"]


def test_the_workers_page_shows_the_servers_embedded_worker(
    sync_api: Any, live_server: LiveServer
) -> None:
    _, admin = live_server.authenticator.create_key("acme", "admin", "wanda")
    with sync_api.sync_playwright() as pw:
        b = Browser(pw, live_server.url)
        try:
            b.sign_in(admin, "/ui/workers")
            row = b.page.locator("tr[data-own-worker]")
            row.wait_for()
            assert "embedded in the server's process" in row.inner_text()
            assert b.page.inner_text("#live-workers") == "1"
            assert row.get_attribute("data-worker")  # the owner id its leases name
            assert b.problems == []
        finally:
            b.close()


@pytest.fixture
def agent_server(tmp_path: Path) -> Iterator[LiveServer]:
    registry = ActivityRegistry()
    registry.register("geo.lookup", lambda city: {"city": city, "country": "FR"})
    script = [tool_calls(("geo_lookup", {"city": "Paris"})), text("Paris is in FR.")]
    with ScriptedLLM(script, pick="turn") as llm:
        store = SQLiteStore(tmp_path / "wovyr.db")
        provider = ProviderConfig("default", llm.base_url, price_in=1000.0, price_out=2000.0)
        engine = Engine(
            store,
            activities=registry,
            providers=Providers({"default": provider}),
            side_effects=TRUSTED,
        )
        try:
            with serving(engine, tmp_path / "home") as live:
                yield live
        finally:
            store.close()


def test_an_agent_runs_calls_show_as_sub_steps(sync_api: Any, agent_server: LiveServer) -> None:
    engine = agent_server.engine.for_tenant("acme")
    _, viewer = agent_server.authenticator.create_key("acme", "viewer", "val")
    record = engine.start(AGENT)
    _wait_until(lambda: engine.query(record.id).status == "completed", "the agent's end")
    with sync_api.sync_playwright() as pw:
        b = Browser(pw, agent_server.url)
        try:
            b.sign_in(viewer, f"/ui/executions/{record.id}")
            graph = b.page.locator(".agent-graph[data-agent='think'] svg.dag")
            graph.wait_for()
            nodes = graph.locator("g.node")
            labels = [nodes.nth(i).get_attribute("data-activity") for i in range(nodes.count())]
            assert labels == ["turn 1 · model", "turn 1 · geo.lookup", "turn 2 · model"]
            assert graph.locator("g.node[data-status='completed']").count() == 3
            bars = b.page.locator("svg.gantt g.bar.sub[data-activity='think']")
            assert bars.count() == 3
            b.page.click(".agent-calls[data-agent='think'] summary")
            table = b.page.locator(".agent-calls[data-agent='think'] table.calls")
            assert table.is_visible()
            row = table.locator("tr[data-step='turn 1 · model']")
            assert "10 / 5" in row.inner_text() and "$0.0200" in row.inner_text()
            assert "tool geo.lookup returned in" in b.page.inner_text("#timeline")
            b.page.screenshot(path=str(ARTIFACTS / "ui-agent-steps.png"), full_page=True)
            assert b.problems == []
        finally:
            b.close()
