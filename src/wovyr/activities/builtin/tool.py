"""The `tool` kind: a Python function registered with `@wovyr.activity("name")`, called with
the rendered `with:` mapping as keyword arguments.

The keys are bound to the handler's signature before every attempt: a key no parameter takes
or a required one left out fails the attempt as `InvalidActivityInput`, not retried, before
the handler runs. `with:` keys are literal (only values hold expressions), so the same check
runs before a foreground `wovyr run` starts and in `wovyr validate --activities` (`preflight`).
"""

from __future__ import annotations

import difflib
from typing import Any

from wovyr.activities.base import ActivityRegistry, bind_inputs, call_handler, parameters_of
from wovyr.activities.dispatch import Dispatch
from wovyr.activities.kinds import ActivityKind, StepProblem, register_kind
from wovyr.kinds.steps import TOOL, ToolStep

__all__ = ["KIND", "ToolStep"]


async def _execute(step: ToolStep, rendered: Any, dispatch: Dispatch) -> Any:
    handler = dispatch.tools.get(step.tool)
    inputs = dict(rendered or {})
    bind_inputs(step.tool, handler, inputs)
    return await call_handler(handler, inputs, dispatch.context)


def _preflight(step: ToolStep, tools: ActivityRegistry) -> list[StepProblem]:
    """A tool no handler is registered as; `with:` keys its handler does not take or lacks
    (keys are literal: only values hold expressions, so the keys are known before a run)."""
    if step.tool not in tools:
        known = tools.names()
        close = difflib.get_close_matches(step.tool, known, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        hint += f"registered: {', '.join(known) or 'none'}; load modules with --activities"
        message = f"no activity handler is registered as {step.tool!r}"
        return [StepProblem(("tool",), message, hint)]
    params = parameters_of(tools.get(step.tool))
    hint = f"it takes: {params.describe()}"
    return [
        StepProblem(("with", p.key) if p.unknown else ("with",), p.message, hint)
        for p in params.problems(step.tool, step.with_)
    ]


KIND = register_kind(ActivityKind.of(TOOL, execute=_execute, preflight=_preflight))
