"""The executions list: filters held in the URL, keyset paging, status counts."""

from __future__ import annotations

import html
import re

from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.testing import drain

from .conftest import APPROVAL_FLOW, Keys, UiClient

DONE_FLOW = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: quick}
activities:
  - id: only
    set: {ok: true}
"""
SIGNAL_FLOW = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: waits-for-go}
activities:
  - id: hold
    wait: {signal: go}
"""


def _ids(page: str) -> list[str]:
    return re.findall(r'<tr data-execution="([^"]+)"', page)


def _next(page: str) -> str | None:
    found = re.search(r'<a href="([^"]+)" class="button" rel="next">', page)
    return html.unescape(found.group(1)) if found else None


def _start(engine: Engine, definition: str, count: int) -> list[str]:
    clock = engine.clock
    assert isinstance(clock, ManualClock)
    ids = []
    for _ in range(count):
        clock.advance(seconds=10)
        ids.append(engine.for_tenant("acme").start(definition).id)
    drain(engine)
    return ids


def test_keyset_paging_walks_everything_once_newest_first(
    client: UiClient, keys: Keys, ui_engine: Engine
) -> None:
    started = _start(ui_engine, DONE_FLOW, 5)
    client.sign_in(keys.viewer_a)
    seen: list[str] = []
    url: str | None = "/ui?limit=2"
    pages = 0
    while url:
        page = client.get(url)
        assert page.status_code == 200
        seen += _ids(page.text)
        url = _next(page.text)
        pages += 1
        if url:
            assert "limit=2" in url and "after=" in url
            assert "First page" in client.get(url).text
    assert seen == list(reversed(started)) and pages == 3


def test_waiting_filters_page_over_derived_matches(
    client: UiClient, keys: Keys, ui_engine: Engine
) -> None:
    approvals = []
    for _ in range(3):
        approvals += _start(ui_engine, APPROVAL_FLOW, 1)
        _start(ui_engine, DONE_FLOW, 1)
        _start(ui_engine, SIGNAL_FLOW, 1)
    client.sign_in(keys.viewer_a)
    seen: list[str] = []
    url: str | None = "/ui?waiting=approval&limit=2"
    while url:
        page = client.get(url)
        seen += _ids(page.text)
        url = _next(page.text)
        if url:
            assert "waiting=approval" in url  # the filter stays in the URL
    assert seen == list(reversed(approvals))
    waiting = client.get("/ui?status=waiting")
    assert len(_ids(waiting.text)) == 6
    assert "approval" in waiting.text and "signal go" in waiting.text
    assert len(_ids(client.get("/ui?waiting=signal").text)) == 3
    assert _ids(client.get("/ui?waiting=timer").text) == []
    assert len(_ids(client.get("/ui?status=completed").text)) == 3


def test_workflow_and_created_range_filters(
    client: UiClient, keys: Keys, ui_engine: Engine
) -> None:
    early = _start(ui_engine, DONE_FLOW, 2)
    clock = ui_engine.clock
    assert isinstance(clock, ManualClock)
    clock.advance(hours=2)
    cut = clock.now().strftime("%Y-%m-%dT%H:%M")
    late = _start(ui_engine, DONE_FLOW, 1) + _start(ui_engine, SIGNAL_FLOW, 1)
    client.sign_in(keys.viewer_a)
    assert set(_ids(client.get(f"/ui?created_from={cut}").text)) == set(late)
    assert set(_ids(client.get(f"/ui?created_to={cut}").text)) == set(early)
    assert set(_ids(client.get("/ui?workflow=quick").text)) == set(early + late[:1])
    page = client.get(f"/ui?workflow=quick&created_from={cut}")
    assert _ids(page.text) == late[:1]
    assert f'value="{cut}"' in page.text and 'value="quick"' in page.text  # form keeps them


def test_status_counts_follow_the_other_filters(
    client: UiClient, keys: Keys, ui_engine: Engine
) -> None:
    _start(ui_engine, DONE_FLOW, 2)
    _start(ui_engine, APPROVAL_FLOW, 1)
    client.sign_in(keys.viewer_a)

    def counts(url: str) -> dict[str, str]:
        return dict(
            re.findall(
                r"<span class=\"dot\"></span>(\w+) <strong>([^<]+)</strong>", client.get(url).text
            )
        )

    assert counts("/ui") == {  # each execution counts once: waiting is not also running
        "running": "0",
        "waiting": "1",
        "completed": "2",
        "failed": "0",
        "cancelled": "0",
        "continued": "0",
    }
    assert counts("/ui?workflow=quick")["completed"] == "2"
    assert counts("/ui?workflow=quick")["running"] == "0"
    page = client.get("/ui?status=waiting")
    assert 'href="/ui?status=completed"' in page.text  # the counts are filter links


def test_bad_filters_are_a_400_with_the_reason(client: UiClient, keys: Keys) -> None:
    client.sign_in(keys.viewer_a)
    page = client.get("/ui?created_from=yesterday&status=sleeping&waiting=godot&after=zzz")
    assert page.status_code == 400
    for reason in ("not a date and time", "is not one of", "not a page cursor"):
        assert reason in page.text


def test_the_polled_rows_fragment_is_light(client: UiClient, keys: Keys, ui_engine: Engine) -> None:
    waiting = _start(ui_engine, APPROVAL_FLOW, 1)
    client.sign_in(keys.viewer_a)
    page = client.get("/ui")
    assert 'data-live-list data-live-url="/ui?partial=rows"' in page.text
    rows = client.get("/ui?partial=rows")
    assert rows.status_code == 200 and "<html" not in rows.text
    assert 'class="count' not in rows.text  # no status counts on a refresh
    assert _ids(rows.text) == waiting and "data-live-list" in rows.text
    done = _start(ui_engine, DONE_FLOW, 1)
    quiet = client.get("/ui?partial=rows&status=completed")
    assert _ids(quiet.text) == done and "data-live-list" not in quiet.text  # stop polling


LINE_FLOW = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: line}
activities:
  - id: hold
    wait: {signal: go}
"""
ORDER_FLOW = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: order}
activities:
  - {id: line_widget, workflow: {name: line}}
  - {id: line_gadget, workflow: {name: line}}
"""


def test_a_parent_waiting_on_children_shows_them_not_an_approval(
    client: UiClient, keys: Keys, ui_engine: Engine
) -> None:
    ui_engine.for_tenant("acme").apply(LINE_FLOW)
    (parent,) = _start(ui_engine, ORDER_FLOW, 1)
    (approval,) = _start(ui_engine, APPROVAL_FLOW, 1)
    kids = [f"{parent}::line_widget", f"{parent}::line_gadget"]
    client.sign_in(keys.viewer_a)
    listed = client.get("/ui").text
    row = listed[listed.index(f'<tr data-execution="{parent}"') :].split("</tr>", 1)[0]
    assert ">waiting</span>" in row
    assert f"child {kids[0]}; child {kids[1]}" in row and "approval" not in row
    assert _ids(client.get("/ui?waiting=approval").text) == [approval]
    assert _ids(client.get("/ui?waiting=child").text) == [parent]
    assert set(_ids(client.get("/ui?status=waiting").text)) == {parent, approval, *kids}
    assert _ids(client.get("/ui?status=running").text) == []
    assert _ids(client.get("/ui?status=completed&waiting=signal").text) == []
    page = client.get(f"/ui/executions/{parent}").text
    waiting_on = page[page.index('id="waiting-on"') :].split("</dd>", 1)[0]
    assert f"child {kids[0]}; child {kids[1]}" in waiting_on and "approval" not in waiting_on
    assert f"waits for child {kids[0]}" in page
