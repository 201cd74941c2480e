"""An execution's page shows each activity's attempt logs (escaped like everything else)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from wovyr.activities.base import ActivityContext, ActivityRegistry
from wovyr.engine.engine import Engine
from wovyr.testing import drain, memory_engine

from .conftest import Keys, UiClient

FLOW = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: talk}
activities:
  - {id: talk, tool: ui.talk, retry: {max_attempts: 2, initial_interval: 0}}
  - {id: quiet, needs: [talk], set: {x: 1}}
"""


@pytest.fixture
def ui_engine() -> Iterator[Engine]:
    tools = ActivityRegistry()

    @tools.activity("ui.talk")
    def talk(ctx: ActivityContext) -> str:
        ctx.log.info("<b>attempt</b> %d", ctx.attempt)
        if ctx.attempt == 1:
            raise RuntimeError("again")
        return "done"

    with memory_engine(tools) as engine:
        yield engine


def test_the_page_shows_each_attempts_lines(
    client: UiClient, keys: Keys, ui_engine: Engine
) -> None:
    eid = ui_engine.for_tenant("acme").start(FLOW).id
    drain(ui_engine)
    client.sign_in(keys.viewer_a)
    page = client.get(f"/ui/executions/{eid}")
    assert page.status_code == 200
    assert page.text.count('data-logs="talk"') == 1 and 'data-logs="quiet"' not in page.text
    assert "Attempt 1: retrying" in page.text and "Attempt 2: completed" in page.text
    assert "INFO ctx: &lt;b&gt;attempt&lt;/b&gt; 2" in page.text
    assert "<b>attempt</b>" not in page.text
