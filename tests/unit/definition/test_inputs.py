"""resolve_inputs and parse_cli_inputs."""

from __future__ import annotations

from typing import Any

import pytest

from wovyr.definition import load_definition, parse_cli_inputs, resolve_inputs
from wovyr.definition.inputs import json_equal, type_matches
from wovyr.errors import InputError

from .conftest import workflow_text

WORKFLOW = load_definition(
    workflow_text("""\
        inputs:
          order_id: {type: string, required: true}
          amount: {type: number, default: 0}
          count: {type: integer, default: 1}
          express: {type: boolean}
          mode: {type: string, enum: [fast, slow], default: fast}
          level: {type: integer, enum: [1, 2]}
          meta: {type: object, default: {source: web}}
          tags: {type: array}
        activities: [{id: a, set: {}}]
        """)
)


def test_defaults_are_applied_and_every_input_is_present() -> None:
    assert resolve_inputs(WORKFLOW, {"order_id": "A-1"}) == {
        "order_id": "A-1",
        "amount": 0.0,
        "count": 1,
        "express": None,
        "mode": "fast",
        "level": None,
        "meta": {"source": "web"},
        "tags": None,
    }


def test_defaults_are_copies() -> None:
    first = resolve_inputs(WORKFLOW, {"order_id": "A"})
    first["meta"]["source"] = "changed"
    assert resolve_inputs(WORKFLOW, {"order_id": "A"})["meta"] == {"source": "web"}


def test_numbers_become_floats_and_integers_stay_ints() -> None:
    resolved = resolve_inputs(WORKFLOW, {"order_id": "A", "amount": 5, "count": 5})
    assert resolved["amount"] == 5.0 and type(resolved["amount"]) is float
    assert resolved["count"] == 5 and type(resolved["count"]) is int


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(InputError) as info:
        resolve_inputs(
            WORKFLOW,
            {"amont": 3, "count": True, "amount": "10", "mode": "medium", "level": True},
        )
    found = [(p.message, p.hint) for p in info.value.problems]
    assert found == [
        ("unknown input 'amont'", "did you mean 'amount'?"),
        ("input 'order_id' is required", None),
        ("input 'amount' must be number, not string", None),
        ("input 'count' must be integer, not boolean", None),
        ('input \'mode\' must be one of "fast", "slow"', None),
        ("input 'level' must be integer, not boolean", None),
    ]
    assert info.value.problems[0].path == "inputs.amont"


def test_an_unknown_input_lists_the_declared_ones_when_nothing_is_close() -> None:
    with pytest.raises(InputError) as info:
        resolve_inputs(WORKFLOW, {"order_id": "A", "zzz": 1})
    assert info.value.problems[0].hint is not None
    assert info.value.problems[0].hint.startswith("declared inputs: amount, count")


@pytest.mark.parametrize(
    ("value", "declared", "ok"),
    [
        (1, "integer", True),
        (True, "integer", False),
        (1.0, "integer", False),
        (1, "number", True),
        (1.5, "number", True),
        (False, "number", False),
        (float("nan"), "number", False),
        ("x", "string", True),
        (True, "boolean", True),
        (0, "boolean", False),
        ({"a": 1}, "object", True),
        ({1: 1}, "object", False),
        ([], "array", True),
        ((), "array", False),
        (1, "unknown", False),
    ],
)
def test_type_matches(value: Any, declared: str, ok: bool) -> None:
    assert type_matches(value, declared) is ok


def test_json_equal_keeps_booleans_apart() -> None:
    assert json_equal(1, 1.0)
    assert not json_equal(True, 1)
    assert not json_equal(0, False)
    assert json_equal({"a": [1, None]}, {"a": [1.0, None]})
    assert not json_equal({"a": True}, {"a": 1})
    assert not json_equal("1", 1)


def test_parse_cli_inputs_reads_json_else_text() -> None:
    assert parse_cli_inputs(
        [
            "name=world",
            "n=3",
            "ratio=1.5",
            "ok=true",
            "none=null",
            'tags=["a","b"]',
            'quoted="007"',
            "id=007",
            "eq=a=b",
            "empty=",
            "nan=NaN",
            "spaced = x ",
        ]
    ) == {
        "name": "world",
        "n": 3,
        "ratio": 1.5,
        "ok": True,
        "none": None,
        "tags": ["a", "b"],
        "quoted": "007",
        "id": "007",
        "eq": "a=b",
        "empty": "",
        "nan": "NaN",
        "spaced": " x ",
    }


def test_parse_cli_inputs_problems() -> None:
    with pytest.raises(InputError) as info:
        parse_cli_inputs(["novalue", "=x", "a=1", "a=2"])
    assert [p.message for p in info.value.problems] == [
        "expected KEY=VALUE, got 'novalue'",
        "expected KEY=VALUE, got '=x'",
        "input 'a' is given twice",
    ]
