"""The execution page in a real headless Chromium shows a streamed answer as it arrives:
part of the text is on the page while the model is still generating, then all of it (the
execution's output), over a real uvicorn server, a real SQLite file and a scripted model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.ui.test_browser import (
    LiveServer,
    _require_browser,
    _wait_until,
    chromium,
    serving,
    watched,
)

from wovyr.activities.base import ActivityRegistry
from wovyr.activities.policy import TRUSTED
from wovyr.activities.providers import ProviderConfig, Providers
from wovyr.engine.engine import Engine
from wovyr.store.sqlite import SQLiteStore
from wovyr.testing.model_server import ScriptedLLM, text

pytestmark = pytest.mark.slow

ANSWER = "".join(f"w{i:03d} " for i in range(250))
FLOW = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: talk}
activities:
  - id: ask
    llm: {model: m1, prompt: "go", stream: true}
output: "${{ activities.ask.output.text }}"
"""


@pytest.fixture
def streaming_server(tmp_path: Path) -> Iterator[LiveServer]:
    with ScriptedLLM([text(ANSWER, stream=True, chunk_delay=0.015)]) as llm:
        store = SQLiteStore(tmp_path / "wovyr.db")
        engine = Engine(
            store,
            activities=ActivityRegistry(),
            providers=Providers({"default": ProviderConfig("default", llm.base_url)}),
            side_effects=TRUSTED,
        )
        try:
            with serving(engine, tmp_path / "home") as live:
                yield live
        finally:
            store.close()


def test_the_page_shows_tokens_as_they_arrive(streaming_server: LiveServer) -> None:
    sync_api: Any = _require_browser()
    live = streaming_server
    engine = live.engine.for_tenant("acme")
    _, token = live.authenticator.create_key("acme", "viewer", "watcher")
    record = None
    with chromium(sync_api) as browser:
        page = browser.new_page()
        problems = watched(page)
        page.goto(f"{live.url}/ui/login")
        page.fill("#api_key", token)
        page.click("button[type=submit]")
        page.wait_for_selector("table.executions")
        record = engine.start(FLOW)  # started once signed in: the page sees it begin
        page.goto(f"{live.url}/ui/executions/{record.id}")
        page.wait_for_selector("#stream .generation pre")
        _wait_until(lambda: bool(page.inner_text("#stream .generation pre")), "some text")
        partial = page.inner_text("#stream .generation pre")
        assert partial and ANSWER.startswith(partial) and len(partial) < len(ANSWER)
        assert engine.query(record.id).status == "running"  # shown while generating
        _wait_until(
            lambda: page.inner_text("#stream .generation pre") == ANSWER, "the whole answer"
        )
        assert page.get_attribute("#stream .generation", "data-attempt") == "1"
        assert problems == []
    assert record is not None
    _wait_until(lambda: engine.query(record.id).status == "completed", "the execution's end")
    assert engine.query(record.id).output == ANSWER
