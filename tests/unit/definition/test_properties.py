"""Property tests: whatever the document, loading raises DefinitionError or succeeds."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wovyr.definition import Workflow, load_definition
from wovyr.errors import DefinitionError

from .conftest import EXAMPLES

EXAMPLE_TEXTS = [p.read_text(encoding="utf-8") for p in EXAMPLES]
YAML_ALPHABET = st.sampled_from(list("abc:-[]{},&*!|>'\"#%@`?\n\t ${}.0123456789~\\\x00é"))
FIELD_NAMES = [
    "apiVersion",
    "kind",
    "metadata",
    "name",
    "version",
    "inputs",
    "activities",
    "id",
    "needs",
    "tool",
    "with",
    "set",
    "shell",
    "argv",
    "wait",
    "timer",
    "after",
    "at",
    "approval",
    "when",
    "retry",
    "max_attempts",
    "timeout",
    "compensate",
    "workflow",
    "output",
    "type",
    "default",
]
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    st.sampled_from(
        [
            "wovyr/v1",
            "Workflow",
            "1s",
            "P1D",
            "${{ inputs.x }}",
            "${{ 1 + }}",
            "${{ activities.a.output }}",
            "a",
            "b",
            "2027-01-01T00:00:00Z",
        ]
    ),
)
TREES = st.recursive(
    SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(
            st.one_of(st.sampled_from(FIELD_NAMES), st.text(max_size=8)), children, max_size=5
        ),
    ),
    max_leaves=30,
)


def loads_or_refuses(source: str | bytes) -> None:
    """Any exception but DefinitionError fails the test; every problem must be located."""
    problems = []
    try:
        workflow = load_definition(source, "prop.yaml")
    except DefinitionError as err:
        problems = err.problems
    else:
        assert isinstance(workflow, Workflow)
        return
    assert problems
    for problem in problems:
        assert problem.file == "prop.yaml"
        assert problem.line is not None and problem.column is not None
        assert problem.message


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes(source: bytes) -> None:
    loads_or_refuses(source)


@settings(max_examples=300, deadline=None)
@given(st.text(YAML_ALPHABET, max_size=120))
def test_random_yaml_like_text(source: str) -> None:
    loads_or_refuses(source)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TREES, st.booleans())
def test_random_structures_as_json_and_yaml(tree: Any, as_json: bool) -> None:
    text = json.dumps(tree) if as_json else _flow_yaml(tree)
    loads_or_refuses(text)


def _flow_yaml(value: Any) -> str:
    """YAML flow style with plain scalars where YAML allows, so scalars get resolved."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {_flow_yaml(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_flow_yaml(v) for v in value) + "]"
    if isinstance(value, str) and value.isalnum() and value.isascii():
        return value
    return json.dumps(value)


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(range(len(EXAMPLE_TEXTS))),
    st.lists(
        st.tuples(st.integers(0, 10_000), st.integers(0, 5), st.text(YAML_ALPHABET, max_size=4)),
        min_size=1,
        max_size=4,
    ),
)
def test_mutated_examples(index: int, edits: list[tuple[int, int, str]]) -> None:
    text = EXAMPLE_TEXTS[index]
    for position, length, insert in edits:
        at = position % (len(text) + 1)
        text = text[:at] + insert + text[at + length :]
    loads_or_refuses(text)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(FIELD_NAMES), st.sampled_from(range(len(EXAMPLE_TEXTS))))
def test_examples_with_a_duplicated_or_typoed_key(field: str, index: int) -> None:
    text = EXAMPLE_TEXTS[index]
    loads_or_refuses(text.replace(f"{field}:", f"{field}x:", 1))
    loads_or_refuses(text + f"\n{field}: 1\n")
