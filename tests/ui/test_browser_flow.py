"""The flow-control page in a real browser (headless Chromium via Playwright, a real uvicorn
server over a SQLite file with its background worker): three real executions share a
workflow concurrency key of limit 1, so one holds its slot (waiting on an approval) and two
wait for it; the page lists the key with its holder and waiters linked to their pages and
the tenant's bucket; once the holder is approved and ends, its slot passes to the next in
start order, as the page shows after a reload. The screenshot `ui-flow.png` lands in
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
KEYED = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: invoice}
inputs: {account: {type: string}}
concurrency: {key: "account-${{ inputs.account }}", limit: 1}
activities:
  - id: review
    wait: {approval: {}}
"""
IDS = ("inv-1", "inv-2", "inv-3")


def test_the_flow_page_shows_a_key_held_and_waited_for(
    sync_api: Any,  # noqa: F811
    live_server: LiveServer,  # noqa: F811
) -> None:
    engine = live_server.engine.for_tenant("acme")
    _, token = live_server.authenticator.create_key("acme", "admin", "erin")
    for execution_id in IDS:
        engine.start(KEYED, {"account": "42"}, execution_id=execution_id)
    engine.set_rate_limit("openai", 500, 60, 50, by="erin")
    # the holder reaches its approval wait (its worker ran it); the others wait for the slot
    _wait_until(
        lambda: engine.query("inv-1").activities.get("review", {}).get("status") == "waiting",
        "the holder's approval wait",
    )
    assert [engine.query(i).status for i in IDS] == ["waiting"] * 3
    ARTIFACTS.mkdir(exist_ok=True)

    with chromium(sync_api) as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        problems = watched(page)  # script errors and CSP violations show up here
        page.goto(f"{live_server.url}/ui")
        page.fill("#api_key", token)
        page.click("button[type=submit]")
        page.wait_for_selector("table.executions")
        page.click("nav.mainnav >> text=Flow control")
        row = page.locator('tr[data-key="account-42"]')
        row.wait_for()
        assert row.get_attribute("data-kind") == "workflow"
        assert row.locator(".running").inner_text() == "1"
        assert row.locator(".waiting").inner_text() == "2"
        assert row.locator("[data-holder]").all_inner_texts() == ["inv-1"]
        assert row.locator("[data-waiter]").all_inner_texts() == ["inv-2", "inv-3"]
        bucket = page.locator('tr[data-bucket="openai"]')
        assert bucket.locator(".capacity").inner_text() == "50"
        assert bucket.locator(".rate").inner_text() == "8.333"
        page.screenshot(path=str(ARTIFACTS / "ui-flow.png"), full_page=True)

        # a waiter's link opens its execution, waiting on the key
        row.locator('[data-waiter="inv-2"]').click()
        page.wait_for_url("**/ui/executions/inv-2")
        assert "concurrency account-42" in page.inner_text("main")

        # the holder ends: its slot passes to the oldest waiter
        engine.approve("inv-1", "review", by="erin")
        _wait_until(lambda: engine.query("inv-1").status == "completed", "the holder's end")
        page.goto(f"{live_server.url}/ui/flow")
        assert row.locator("[data-holder]").all_inner_texts() == ["inv-2"]
        assert row.locator("[data-waiter]").all_inner_texts() == ["inv-3"]
        assert problems == []
