"""An execution's page shows a failed handler's traceback as Python prints it (escaped), under
the activity, the execution's error and the failure event: not as an escaped JSON string."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator

import pytest
from tests.tracebacks import wovyr_frames

from wovyr.activities.base import ActivityRegistry
from wovyr.engine.engine import Engine
from wovyr.testing import drain, memory_engine

from .conftest import Keys, UiClient

FLOW = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: charge}
activities:
  - id: charge
    tool: ui.charge
    with: {amount: 500}
    retry: {max_attempts: 1}
"""


def _over_limit(amount: int) -> None:
    raise ValueError(f"amount {amount} <over> the limit")


@pytest.fixture
def ui_engine() -> Iterator[Engine]:
    tools = ActivityRegistry()

    @tools.activity("ui.charge")
    def charge(amount: int) -> None:
        _over_limit(amount)

    with memory_engine(tools) as engine:
        yield engine


def test_the_execution_page_shows_the_handlers_traceback(
    client: UiClient, keys: Keys, ui_engine: Engine
) -> None:
    eid = ui_engine.for_tenant("acme").start(FLOW).id
    drain(ui_engine)
    client.sign_in(keys.viewer_a)
    page = client.get(f"/ui/executions/{eid}")
    assert page.status_code == 200
    shown = re.findall(r'<pre class="error-text traceback"[^>]*>(.*?)</pre>', page.text, re.S)
    # the activity's, the execution's, and in the timeline those of ActivityFailed,
    # CompensationStarted (its reason) and ExecutionFailed
    assert len(shown) == 5
    trace = html.unescape(shown[0])
    assert all(html.unescape(s) == trace for s in shown)
    assert trace.startswith("Traceback (most recent call last):\n")
    assert "in charge\n" in trace and "in _over_limit\n" in trace
    assert wovyr_frames(trace) == []  # no frame of the project's package
    assert trace.rstrip().endswith("ValueError: amount 500 <over> the limit")
    assert "&lt;over&gt;" in shown[0]  # escaped like everything else on the page
    assert "&#34;traceback&#34;" not in page.text and "\\n  File" not in page.text
