"""A tool's `with:` keys against its handler's signature: the parameters read (and cached)
once per handler, the problems named with a did-you-mean, the non-retryable error of an
attempt, and the check of a whole workflow before it runs."""

from __future__ import annotations

import functools
import textwrap
from typing import Any

import pytest

from wovyr.activities.base import (
    ActivityContext,
    ActivityRegistry,
    NonRetryableError,
    bind_inputs,
    parameters_of,
)
from wovyr.definition.parse import load_definition
from wovyr.definition.preflight import handler_problems


def greet(name: str, ctx: ActivityContext, greeting: str = "Hello", *, loud: bool = False) -> str:
    return f"{greeting}, {name}"


def test_parameters_are_read_once_and_describe_what_the_handler_takes() -> None:
    params = parameters_of(greet)
    assert params is parameters_of(greet)  # cached
    assert params.names == ("name", "greeting", "loud") and params.required == ("name",)
    assert params.wants_ctx and not params.any_keyword
    assert params.describe() == "name, greeting (optional), loud (optional)"
    assert parameters_of(lambda: None).describe() == "no inputs"

    def catch_all(a: int, /, b: int = 0, **rest: Any) -> None: ...

    loose = parameters_of(catch_all)
    assert loose.names == ("b",) and loose.required == ("a",) and loose.any_keyword
    assert loose.describe() == "b (optional), any other key (**kwargs)"
    assert [p.message for p in loose.problems("t", ["b", "zzz"])] == ["tool 't' needs input 'a'"]


def test_problems_name_each_key_with_a_close_match() -> None:
    params = parameters_of(greet)
    assert params.problems("greet", ["name"]) == []
    found = params.problems("greet", ["nmae", "greting", "ctx", "speed"])
    assert [(p.key, p.unknown, p.message) for p in found] == [
        ("nmae", True, "tool 'greet' takes no input 'nmae' (did you mean 'name'?)"),
        ("greting", True, "tool 'greet' takes no input 'greting' (did you mean 'greeting'?)"),
        ("ctx", True, "input 'ctx' of tool 'greet' is reserved for the activity context"),
        ("speed", True, "tool 'greet' takes no input 'speed'"),
        ("name", False, "tool 'greet' needs input 'name'"),
    ]


def test_unreadable_and_unhashable_handlers() -> None:
    assert parameters_of(max).readable is False
    assert parameters_of(max).problems("max", ["anything"]) == []  # called as it is

    class Unhashable:
        __hash__ = None  # type: ignore[assignment]

        def __call__(self, x: int) -> int:
            return x

    assert parameters_of(Unhashable()).names == ("x",)
    partial = functools.partial(greet, greeting="Hi")
    assert parameters_of(partial).required == ("name",)


def test_bind_inputs_refuses_before_the_call_and_never_retries() -> None:
    bind_inputs("greet", greet, {"name": "Ada", "loud": True})
    with pytest.raises(NonRetryableError) as info:
        bind_inputs("greet", greet, {"nmae": "Ada"})
    error = info.value
    assert error.type == "InvalidActivityInput" and not error.retryable
    assert error.message == (
        "tool 'greet' takes no input 'nmae' (did you mean 'name'?); tool 'greet' needs input "
        "'name'; it takes: name, greeting (optional), loud (optional)"
    )


WORKFLOW = textwrap.dedent("""\
    apiVersion: wovyr/v1
    kind: Workflow
    metadata: {name: checks, version: "3"}
    activities:
      - id: one
        tool: greet
        with: {name: Ada, nmae: Ada}
      - id: two
        set: {x: 1}
        compensate: {tool: gret, with: {}}
      - id: three
        shell: {argv: [echo]}
    """)


def test_a_workflow_is_checked_against_the_registry_by_data_path_or_line(tmp_path: Any) -> None:
    tools = ActivityRegistry()
    tools.register("greet", greet)
    workflow = load_definition(WORKFLOW)
    stored = handler_problems(workflow, tools)  # a stored definition: no file, no lines
    assert [(p.file, p.path, p.line) for p in stored] == [
        ("workflow checks v3", "activities[0].with.nmae", None),
        ("workflow checks v3", "activities[1].compensate.tool", None),
    ]
    assert stored[1].hint == (
        "did you mean 'greet'? registered: greet; load modules with --activities"
    )
    path = tmp_path / "checks.yaml"
    path.write_text(WORKFLOW)
    located = handler_problems(workflow, tools, path=path)
    assert [(p.line, p.column) for p in located] == [(7, 23), (10, 18)]
    tools.register("gret", lambda: None)
    tools.register("greet", lambda name, **rest: name)
    assert handler_problems(workflow, tools) == []
