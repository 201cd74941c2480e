"""/docs in a real browser: the vendored API browser renders the operations of
/openapi.json under a policy that lets the page load nothing from elsewhere, and no
request leaves the server (headless Chromium, as tests/ui/test_browser.py)."""

from __future__ import annotations

from typing import Any

import pytest

from .test_browser import (
    ARTIFACTS,
    LiveServer,
    chromium,
    live_server,
    sync_api,
    watched,
)

pytestmark = pytest.mark.slow
__all__ = ["live_server", "sync_api"]  # the fixtures, used by name


def test_docs_renders_the_operations_from_vendored_files_only(
    sync_api: Any, live_server: LiveServer
) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    with chromium(sync_api) as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        problems = watched(page)  # script errors and CSP violations show up here
        requested: list[str] = []
        page.on("request", lambda r: requested.append(r.url))
        page.goto(f"{live_server.url}/docs")
        # RapiDoc renders into its shadow root; Playwright's locators pierce it
        page.get_by_text("List executions, newest first").first.wait_for()
        page.get_by_text("/api/v1/workflows/{execution_id}/signal").first.wait_for()
        page.screenshot(path=str(ARTIFACTS / "api-browser.png"))
    assert requested and all(url.startswith(live_server.url) for url in requested), requested
    assert f"{live_server.url}/openapi.json" in requested
    assert not problems, problems
