"""The web UI in a real browser: headless Chromium (Debian's `chromium` package) driven by
Playwright for Python, against a real uvicorn server over a SQLite file.

The browser signs in with an API key, opens the list, opens an execution waiting on an
approval, checks the DAG nodes' states, approves with a comment, and sees the execution
complete (the page refreshes itself). Screenshots land in `test-artifacts/`.

Without Chromium or Playwright this skips locally and FAILS when CI=true.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from wovyr.engine.engine import Engine
from wovyr.platform.auth import Authenticator
from wovyr.settings import Settings
from wovyr.store.sqlite import SQLiteStore

from .conftest import APPROVAL_FLOW

pytestmark = pytest.mark.slow

CHROMIUM = Path(os.environ.get("WOVYR_TEST_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
DEADLINE = 30.0


def _require_browser() -> Any:
    """The Playwright sync API, or skip (locally) / fail (CI) with the reason."""
    problem = None
    try:
        from playwright import sync_api
    except ImportError as exc:
        problem = f"Playwright for Python is not installed ({exc}); pip install -e '.[test]'"
    if problem is None and not CHROMIUM.exists():
        problem = f"no Chromium at {CHROMIUM}: apt-get install -y chromium"
    if problem is not None:
        if IN_CI:
            pytest.fail(problem)
        pytest.skip(problem)
    return sync_api


@contextmanager
def chromium(sync_api: Any) -> Iterator[Any]:
    """Debian's headless Chromium driven by Playwright, closed on the way out."""
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def watched(page: Any) -> list[str]:
    """`page` with the tests' deadline; the list it returns fills with the page's script
    errors (console errors, uncaught exceptions, CSP violations)."""
    page.set_default_timeout(DEADLINE * 1000)
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda exc: problems.append(str(exc)))
    return problems


def _wait_until(check: Callable[[], bool], what: str, deadline: float = DEADLINE) -> None:
    end = time.monotonic() + deadline
    while not check():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class LiveServer:
    url: str
    engine: Engine
    authenticator: Authenticator


@contextmanager
def serving(engine: Engine, home: Path) -> Iterator[LiveServer]:
    """`create_app` over `engine` (API, UI and its background worker) served by uvicorn in a
    thread, until the block ends."""
    import uvicorn

    from wovyr.server.app import create_app

    settings = Settings(home=home, dispatch_interval=0.2, poll_interval=0.2)
    app = create_app(engine, settings)
    port = _free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="wovyr-ui-server", daemon=True)
    thread.start()
    _wait_until(lambda: server.started, "the server to start")
    try:
        yield LiveServer(f"http://127.0.0.1:{port}", engine, app.state.authenticator)
    finally:
        server.should_exit = True
        thread.join(timeout=15)


@pytest.fixture
def live_server(tmp_path: Path) -> Iterator[LiveServer]:
    store = SQLiteStore(tmp_path / "wovyr.db")
    try:
        with serving(Engine(store), tmp_path / "home") as live:
            yield live
    finally:
        store.close()


@pytest.fixture
def sync_api() -> Any:
    """Checked before the server starts: no point serving a browser that is not there."""
    return _require_browser()


def test_sign_in_inspect_approve_and_complete(sync_api: Any, live_server: LiveServer) -> None:
    engine = live_server.engine.for_tenant("acme")
    _, token = live_server.authenticator.create_key("acme", "operator", "alice")
    record = engine.start(APPROVAL_FLOW, {"amount": 250})
    _wait_until(lambda: engine.query(record.id).status == "waiting", "the approval wait")
    ARTIFACTS.mkdir(exist_ok=True)

    with chromium(sync_api) as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        problems = watched(page)  # script errors and CSP violations show up here
        # Not signed in: the list sends us to the sign-in page.
        page.goto(f"{live_server.url}/ui")
        assert "/ui/login" in page.url
        page.fill("#api_key", token)
        page.click("button[type=submit]")
        page.wait_for_selector("table.executions")
        row = page.locator(f'tr[data-execution="{record.id}"]')
        assert row.locator(".badge").inner_text() == "waiting"
        assert "approval" in row.inner_text()
        page.screenshot(path=str(ARTIFACTS / "ui-list.png"), full_page=True)

        row.locator("a").click()
        page.wait_for_selector("svg.dag")
        status = "svg.dag g.node[data-activity='{}']"
        assert page.get_attribute(status.format("prepare"), "data-status") == "completed"
        assert page.get_attribute(status.format("approve"), "data-status") == "waiting"
        assert page.get_attribute(status.format("ship"), "data-status") == "pending"
        assert "approval" in page.inner_text("#waiting-on")
        page.screenshot(path=str(ARTIFACTS / "ui-execution.png"), full_page=True)
        dark = browser.new_page(color_scheme="dark", viewport={"width": 1280, "height": 900})
        dark.context.add_cookies(page.context.cookies())
        dark.goto(page.url)
        dark.wait_for_selector("svg.dag g.node[data-status='waiting']")
        dark.screenshot(path=str(ARTIFACTS / "ui-execution-dark.png"), full_page=True)
        dark.close()

        form = page.locator("form[data-approval='approve']")
        form.locator("textarea[name=comment]").fill("within budget")
        form.locator("button[value=approve]").click()
        # The redirect lands on the page, which refreshes itself until the end.
        page.wait_for_selector("#execution-status.status-completed")
        page.wait_for_selector("svg.dag g.node[data-activity='ship'][data-status='completed']")
        assert page.get_attribute(status.format("approve"), "data-status") == "completed"
        assert "approved by alice" in page.inner_text("#timeline")
        page.screenshot(path=str(ARTIFACTS / "ui-execution-completed.png"), full_page=True)

        # The page refreshes itself: a decision made elsewhere shows up without a reload.
        other = engine.start(APPROVAL_FLOW)
        _wait_until(lambda: engine.query(other.id).status == "waiting", "the second wait")
        page.goto(f"{live_server.url}/ui/executions/{other.id}")
        page.wait_for_selector("#execution-status.status-waiting")
        navigations: list[str] = []
        page.on("framenavigated", lambda frame: navigations.append(frame.url))
        engine.approve(other.id, "approve", True, by="api", comment="elsewhere")
        page.wait_for_selector("#execution-status.status-completed")
        assert navigations == []  # swapped in place by the script, not reloaded
        assert page.locator("form[data-approval]").count() == 0  # no stale actions
        assert problems == []

    view = engine.query(record.id)
    assert view.status == "completed"
    assert view.output == {"shipped": True}
    decided = [e for e in engine.history(record.id) if e.type == "ApprovalDecided"]
    assert decided[0].data["by"] == "alice"
    assert decided[0].data["comment"] == "within budget"


def test_the_whole_flow_works_with_javascript_disabled(
    sync_api: Any, live_server: LiveServer
) -> None:
    engine = live_server.engine.for_tenant("acme")
    _, token = live_server.authenticator.create_key("acme", "operator", "bob")
    record = engine.start(APPROVAL_FLOW)
    _wait_until(lambda: engine.query(record.id).status == "waiting", "the approval wait")

    with chromium(sync_api) as browser:
        context = browser.new_context(java_script_enabled=False)
        page = context.new_page()
        watched(page)
        page.goto(f"{live_server.url}/ui/executions/{record.id}")
        page.fill("#api_key", token)
        page.click("button[type=submit]")  # back to the page asked for
        page.wait_for_selector("svg.dag g.node[data-activity='approve'][data-status='waiting']")
        form = page.locator("form[data-approval='approve']")
        form.locator("textarea[name=comment]").fill("no script needed")
        form.locator("button[value=approve]").click()
        page.wait_for_selector(".flash.ok")
        end = time.monotonic() + DEADLINE
        while "status-completed" not in (page.get_attribute("#execution-status", "class") or ""):
            assert time.monotonic() < end, "the execution did not complete"
            page.wait_for_timeout(100)  # a poll interval, not a guess at how long it takes
            page.reload()  # no script: the reader refreshes
        assert "approved by bob" in page.inner_text("#timeline")


RELAY = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: relay}
activities:
  - {id: a, set: {n: 1}}
  - {id: b, needs: [a], set: {n: "${{ activities.a.output.n + 1 }}"}}
  - {id: c, needs: [b], wait: {signal: go}}
"""


def test_rerun_from_an_activity_in_the_browser(sync_api: Any, live_server: LiveServer) -> None:
    engine = live_server.engine.for_tenant("acme")
    _, token = live_server.authenticator.create_key("acme", "operator", "carol")
    engine.start(RELAY, execution_id="relay-1")
    _wait_until(lambda: engine.query("relay-1").status == "waiting", "the signal wait")
    engine.cancel("relay-1")
    ARTIFACTS.mkdir(exist_ok=True)

    with chromium(sync_api) as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        watched(page)
        page.goto(f"{live_server.url}/ui/executions/relay-1")
        page.fill("#api_key", token)
        page.click("button[type=submit]")
        page.wait_for_selector("#rerun-form")
        page.screenshot(path=str(ARTIFACTS / "ui-rerun-original.png"), full_page=True)
        page.locator("#act-c form.rerun-from button").click()
        page.wait_for_selector("#rerun-of-link")
        assert page.inner_text("#rerun-of-link") == "relay-1"
        assert page.locator(".reused").count() == 2
        page.wait_for_selector("svg.dag g.node[data-activity='c'][data-status='waiting']")
        page.screenshot(path=str(ARTIFACTS / "ui-rerun.png"), full_page=True)
        page.click("#rerun-of-link")
        page.wait_for_selector("#reruns a.rerun-link")
    assert len(engine.reruns("relay-1")) == 1


def test_schedules_definitions_and_workers_pages(
    sync_api: Any, live_server: LiveServer, tmp_path: Path
) -> None:
    from wovyr.scheduling.schedules import Schedules

    engine = live_server.engine.for_tenant("acme")
    _, token = live_server.authenticator.create_key("acme", "admin", "dana")
    engine.apply(APPROVAL_FLOW)
    schedules = Schedules(engine)
    schedules.create("nightly", workflow="purchase", cron="0 3 * * *")

    with chromium(sync_api) as browser:
        context = browser.new_context(timezone_id="Asia/Tokyo")  # UTC+9, no DST
        page = context.new_page()
        problems = watched(page)
        page.goto(f"{live_server.url}/ui/schedules")
        page.fill("#api_key", token)
        page.click("button[type=submit]")
        row = page.locator('tr[data-schedule="nightly"]')
        assert "03:00:00 UTC" in row.locator("td.next-utc").inner_text()
        local = row.locator("td.next-local time").first
        # the script rewrote the UTC text to the viewer's time: 03:00 UTC is 12:00 JST
        _wait_until(lambda: "UTC" not in local.inner_text(), "the local time")
        assert "12:00:00" in local.inner_text()
        page.screenshot(path=str(tmp_path / "ui-schedules.png"), full_page=True)
        row.locator("button[data-action=pause]").click()
        page.wait_for_selector('tr[data-schedule="nightly"][data-paused="true"]')
        assert schedules.get("nightly").paused

        page.click("nav.mainnav >> text=Definitions")
        page.click('tr[data-definition="purchase"] a')
        page.wait_for_selector("svg.dag g.node[data-activity='approve']")
        assert "- id: approve" in page.inner_text("#definition-source")
        page.screenshot(path=str(tmp_path / "ui-definition.png"), full_page=True)

        page.click("nav.mainnav >> text=Workers")
        page.wait_for_selector("#in-flight")
        page.screenshot(path=str(tmp_path / "ui-workers.png"), full_page=True)
        assert problems == []
    assert (tmp_path / "ui-schedules.png").stat().st_size > 0


def test_gantt_items_and_saga_in_the_browser(sync_api: Any, live_server: LiveServer) -> None:
    from .test_routes import SAGA_MAP

    engine = live_server.engine.for_tenant("acme")
    _, token = live_server.authenticator.create_key("acme", "viewer", "dana")
    engine.start(SAGA_MAP, execution_id="saga-1")
    _wait_until(lambda: engine.query("saga-1").finished, "the saga to end")
    ARTIFACTS.mkdir(exist_ok=True)

    with chromium(sync_api) as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        watched(page)
        page.goto(f"{live_server.url}/ui/executions/saga-1")
        page.fill("#api_key", token)
        page.click("button[type=submit]")
        page.wait_for_selector("svg.gantt")
        bars = page.locator("svg.gantt g.bar")
        assert bars.count() == 3
        assert bars.nth(2).get_attribute("data-activity") == "charge"
        box = page.locator("svg.gantt g.bar[data-activity='charge'] rect").bounding_box()
        assert box is not None and box["width"] >= 2  # drawn, not collapsed
        assert page.locator("svg.dag .compensation path.undo").count() == 1
        assert page.locator("svg.dag g.node[data-activity='lines'] .items .seg").count() == 1
        page.screenshot(path=str(ARTIFACTS / "ui-gantt-saga.png"), full_page=True)
        page.locator("svg.gantt g.bar[data-activity='charge'] rect").click()
        _wait_until(lambda: page.url.endswith("#act-charge"), "the bar's link")


def test_events_and_webhooks_pages(sync_api: Any, live_server: LiveServer, tmp_path: Path) -> None:
    """An event received by a trigger is listed with the execution it started (a link that
    opens it), and the webhook delivery that execution's completion made is listed with its
    endpoint on the Webhooks page."""
    from datetime import UTC, datetime

    from tests.reliability.crash_child import FULFIL, TRIGGERS

    from wovyr.engine.triggers import apply_trigger, receive_event
    from wovyr.store.events import WebhookEndpointRecord

    engine = live_server.engine.for_tenant("acme")
    _, token = live_server.authenticator.create_key("acme", "admin", "dana")
    engine.apply(FULFIL)
    apply_trigger(engine, TRIGGERS[0])  # orders: starts fulfil, dedup on the id
    url = "https://hooks.example.com/wovyr/in"
    events = ("execution.completed",)
    now = datetime.now(UTC)
    endpoint = WebhookEndpointRecord("acme", "ops", url, events, None, ("WH",), now, "test")
    engine.store.put_webhook_endpoint(endpoint)
    [started] = receive_event(engine, "orders.created", b'{"id": "o-7"}').records
    assert started.outcome == "started" and started.execution_id is not None
    _wait_until(
        lambda: engine.query(started.execution_id or "").status == "completed",
        "the background worker to complete the triggered execution",
    )

    with chromium(sync_api) as browser:
        page = browser.new_page()
        problems = watched(page)
        page.goto(f"{live_server.url}/ui/events")
        page.fill("#api_key", token)
        page.click("button[type=submit]")
        row = page.locator(f'tr[data-event="{started.id}"][data-outcome="started"]')
        assert "o-7" in row.inner_text()  # the dedup key
        assert page.locator('tr[data-trigger="orders"]').count() == 1
        page.screenshot(path=str(tmp_path / "ui-events.png"), full_page=True)
        row.locator(f'a[data-execution="{started.execution_id}"]').click()
        page.wait_for_selector("svg.dag g.node[data-activity='a']")
        assert started.execution_id in page.url

        page.click("nav.mainnav >> text=Webhooks")
        delivery = page.locator(f'tr[data-delivery] a[data-execution="{started.execution_id}"]')
        delivery.wait_for()
        endpoint_row = page.locator('tr[data-endpoint="ops"]')
        assert "/wovyr/in" in endpoint_row.inner_text()  # an admin sees the URL's path
        assert "WH" in endpoint_row.inner_text()
        page.screenshot(path=str(tmp_path / "ui-deliveries.png"), full_page=True)
        assert problems == []
    assert (tmp_path / "ui-events.png").stat().st_size > 0
