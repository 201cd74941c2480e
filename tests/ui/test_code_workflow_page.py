"""A code workflow's execution page: its graph is the steps that ran (steps asked together,
as by `asyncio.gather`, side by side, after the step before them), and each step names
the line of the function that asked for it."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable

import wovyr
from wovyr.engine.engine import Engine
from wovyr.testing import drain

from .conftest import Keys, UiClient


@wovyr.workflow(name="ui-code-page")
async def page_flow(ctx: wovyr.Context) -> str:
    ctx.now()
    await asyncio.gather(ctx.signal("left"), ctx.signal("right"))
    await ctx.signal("last")
    return "done"


LINE = page_flow.fn.__code__.co_firstlineno  # the decorator's line


def test_the_page_draws_the_steps_that_ran_and_names_their_lines(
    client: UiClient, keys: Keys, ui_engine: Engine, make_client: Callable[[], UiClient]
) -> None:
    acme = ui_engine.for_tenant("acme")
    acme.start(page_flow.definition(), execution_id="coded")
    drain(ui_engine)
    for name in ("left", "right"):
        acme.signal("coded", name, {})
    drain(ui_engine)

    client.sign_in(keys.viewer_a)
    page = client.get("/ui/executions/coded")
    assert page.status_code == 200
    edges = set(re.findall(r'data-from="([^"]+)" data-to="([^"]+)"', page.text))
    assert edges == {
        ("now_1", "left_2"),
        ("now_1", "right_3"),
        ("left_2", "last_4"),
        ("right_3", "last_4"),
    }
    sources = re.findall(r'class="muted small mono source"[^>]*>([^<]+)<', page.text)
    here = "test_code_workflow_page.py"
    assert sources == [
        f"{here}:{LINE + 2}",
        f"{here}:{LINE + 3}",
        f"{here}:{LINE + 3}",
        f"{here}:{LINE + 4}",
    ]
    other = make_client()  # another tenant does not see it
    other.sign_in(keys.operator_b)
    assert other.get("/ui/executions/coded").status_code == 404
