"""A continue-as-new chain in the web UI: each run's page links to the run it continues and
to the run that continues it, the status badge says `continued`, the timeline names the next
run, and the list filters on `continued`."""

from __future__ import annotations

from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.testing import drain

from .conftest import Keys, UiClient


def _a_second_later(engine: Engine) -> None:
    """A chain starts at most one run a second (`min_continue_interval`)."""
    assert isinstance(engine.clock, ManualClock)
    engine.clock.advance(1)


CHAIN = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: chain}
inputs: {n: {type: integer, default: 1}}
activities:
  - {id: go, wait: {signal: go}}
output: "${{ inputs.n }}"
continue_as_new: {when: "${{ inputs.n < 3 }}", input: {n: "${{ inputs.n + 1 }}"}}
"""


def test_each_run_links_both_ways(client: UiClient, keys: Keys, ui_engine: Engine) -> None:
    acme = ui_engine.for_tenant("acme")
    acme.start(CHAIN, execution_id="sub")
    drain(ui_engine)
    _a_second_later(ui_engine)
    acme.signal("sub", "go")
    drain(ui_engine)
    client.sign_in(keys.viewer_a)

    first = client.get("/ui/executions/sub")
    assert first.status_code == 200
    assert 'id="execution-status">continued<' in first.text
    assert 'class="badge status-continued"' in first.text
    assert 'href="/ui/executions/sub~c2" id="continued-as-link">sub~c2<' in first.text
    assert "continued as new: run 2 is sub~c2" in first.text
    assert "continued-from-link" not in first.text

    second = client.get("/ui/executions/sub~c2")
    assert second.status_code == 200
    assert 'id="execution-status">waiting<' in second.text
    assert 'href="/ui/executions/sub" id="continued-from-link">sub<' in second.text
    assert "continued-as-link" not in second.text
    assert "continuing sub" in second.text

    listed = client.get("/ui?status=continued")
    assert listed.status_code == 200
    assert 'data-execution="sub"' in listed.text and 'data-execution="sub~c2"' not in listed.text


def test_another_tenant_sees_no_run_of_the_chain(
    client: UiClient, keys: Keys, ui_engine: Engine
) -> None:
    acme = ui_engine.for_tenant("acme")
    acme.start(CHAIN, execution_id="sub")
    drain(ui_engine)
    _a_second_later(ui_engine)
    acme.signal("sub", "go")
    drain(ui_engine)
    client.sign_in(keys.operator_b)
    for run in ("sub", "sub~c2"):
        assert client.get(f"/ui/executions/{run}").status_code == 404
