"""Bulk actions in a real browser (headless Chromium via Playwright, a real uvicorn server
over a SQLite file with its background loop): an operator filters the executions list,
confirms "Cancel all matching", lands on the batch's page, which refreshes itself until the
server has worked through it, and finds it on the batches page. Screenshots land in
`test-artifacts/` beside the other UI tests'."""

from __future__ import annotations

from typing import Any

import pytest

from .test_browser import (  # the fixtures by name
    ARTIFACTS,
    LiveServer,
    _wait_until,
    chromium,
    live_server,  # noqa: F401
    sync_api,  # noqa: F401
    watched,
)

pytestmark = pytest.mark.slow
COUNT = 25
FLOW = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: relay}
activities:
  - {id: c, wait: {signal: go}}
"""


def test_cancel_all_matching_from_the_list_in_the_browser(
    sync_api: Any,  # noqa: F811
    live_server: LiveServer,  # noqa: F811
) -> None:
    engine = live_server.engine.for_tenant("acme")
    _, token = live_server.authenticator.create_key("acme", "operator", "dana")
    for i in range(COUNT):
        engine.start(FLOW, execution_id=f"relay-{i:02d}", labels={"team": "ops"})
    engine.start(FLOW, execution_id="keep-me", labels={"team": "web"})
    _wait_until(
        lambda: engine.list(status="waiting", limit=100).items.__len__() == COUNT + 1,
        "every execution to wait",
    )
    ARTIFACTS.mkdir(exist_ok=True)

    with chromium(sync_api) as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        problems = watched(page)  # script errors and CSP violations show up here
        page.goto(f"{live_server.url}/ui?label=team%3Dops")
        page.fill("#api_key", token)
        page.click("button[type=submit]")
        page.wait_for_selector("table.executions")
        page.click("#bulk-action summary")
        page.check("#bulk-confirm")
        page.screenshot(path=str(ARTIFACTS / "ui-bulk-confirm.png"), full_page=True)
        page.click("#bulk-cancel")
        page.wait_for_selector("#notice")
        assert "submitted" in page.inner_text("#notice")
        # the page refreshes itself until the background has worked through the batch
        page.wait_for_selector("#batch-status:text('completed')")
        assert page.inner_text("#batch-progress").startswith(f"{COUNT} ok · 0 skipped")
        assert page.locator("#batch-items tr[data-outcome='ok']").count() == COUNT
        page.screenshot(path=str(ARTIFACTS / "ui-batch.png"), full_page=True)

        page.click("a:text('« Batches')")
        page.wait_for_selector("#batches tr[data-status='completed']")
        page.screenshot(path=str(ARTIFACTS / "ui-batches.png"), full_page=True)
        assert problems == []
    assert all(engine.get(f"relay-{i:02d}").status == "cancelled" for i in range(COUNT))
    assert engine.get("keep-me").status == "running"
