"""Expressions: typing of rendered values, references, conditions, bounds and safety."""

from __future__ import annotations

from typing import Any

import pytest

from wovyr.definition import expr
from wovyr.definition.expr import (
    MAX_RESULT_BYTES,
    TEMPLATE_RE,
    compile_expression,
    evaluate,
    evaluate_condition,
    iter_expressions,
    references,
    render,
    template_sources,
)
from wovyr.errors import ExpressionError

CONTEXT: dict[str, Any] = {
    "inputs": {"name": "Ada", "n": 3, "ratio": 1.5, "tags": ["a", "b"], "on": True},
    "activities": {
        "reserve": {"output": {"id": "R-1", "count": 2}, "status": "completed", "error": None},
        "skipped": {"output": None, "status": "skipped", "error": None},
    },
    "execution": {
        "id": "e-1",
        "workflow": "wf",
        "version": "1",
        "started_at": "2026-01-01T00:00:00Z",
    },
}


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("${{ inputs.n }}", 3),
        ("${{inputs.n}}", 3),
        ("${{ inputs.n * 2 }}", 6),
        ("${{ inputs.ratio }}", 1.5),
        ("${{ inputs.on }}", True),
        ("${{ inputs.tags }}", ["a", "b"]),
        ("${{ activities.reserve.output }}", {"id": "R-1", "count": 2}),
        ("${{ activities.skipped.output }}", None),
        ("${{ inputs.name }}", "Ada"),
        ("${{ {'k': [1, 2]} }}", {"k": [1, 2]}),
    ],
)
def test_a_whole_string_expression_keeps_its_type(template: str, expected: Any) -> None:
    result = render(template, CONTEXT)
    assert result == expected
    assert type(result) is type(expected)


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("Hello, ${{ inputs.name }}!", "Hello, Ada!"),
        ("n=${{ inputs.n }} r=${{ inputs.ratio }}", "n=3 r=1.5"),
        ("on=${{ inputs.on }} off=${{ !inputs.on }}", "on=true off=false"),
        ("out=${{ activities.skipped.output }}", "out=null"),
        ("tags=${{ inputs.tags }}", 'tags=["a","b"]'),
        ("obj=${{ activities.reserve.output }}", 'obj={"count":2,"id":"R-1"}'),
        (" ${{ inputs.n }}", " 3"),
        ("${{ inputs.n }}${{ inputs.n }}", "33"),
        ("no expressions", "no expressions"),
    ],
)
def test_an_embedded_expression_yields_text(template: str, expected: str) -> None:
    assert render(template, CONTEXT) == expected


def test_render_walks_structures_and_leaves_other_values_alone() -> None:
    value = {"a": ["${{ inputs.n }}", 7, None, {"b": "x${{ inputs.n }}"}], "${{ k }}": 1.5}
    assert render(value, CONTEXT) == {"a": [3, 7, None, {"b": "x3"}], "${{ k }}": 1.5}


def test_values_from_the_context_are_never_rendered_again() -> None:
    context = {"inputs": {"evil": "${{ inputs.secret }}", "secret": "s3cr3t"}}
    assert render("${{ inputs.evil }}", context) == "${{ inputs.secret }}"
    assert render("x ${{ inputs.evil }}", context) == "x ${{ inputs.secret }}"


def test_errors_name_the_field_path() -> None:
    with pytest.raises(ExpressionError) as info:
        render(
            {"order": ["ok", "${{ inputs.missing }}"]}, CONTEXT, where="activity 'ship' field with"
        )
    assert info.value.where == "activity 'ship' field with.order[1]"
    assert str(info.value) == "activity 'ship' field with.order[1]: no such key: 'missing'"


@pytest.mark.parametrize(
    ("src", "message"),
    [
        ("1 / 0", "division by zero"),
        ("inputs.name + 1", "Unsupported operation"),
        ("inputs.tags[5]", "index out of bounds"),
        ("9223372036854775807 + 1", "overflow"),
        ("undefined_name", "Undefined variable"),
        ("1.0 / 0.0", "not a finite number"),
    ],
)
def test_runtime_errors_are_expression_errors(src: str, message: str) -> None:
    with pytest.raises(ExpressionError) as info:
        evaluate(src, CONTEXT, where="activity 'a' field set.v")
    assert message in str(info.value)
    assert info.value.where == "activity 'a' field set.v"


@pytest.mark.parametrize(
    ("src", "expected"),
    [
        ("timestamp('2026-01-01T10:00:00+02:00')", "2026-01-01T08:00:00Z"),
        ("duration('90m')", "5400s"),
        ("b'hi'", "aGk="),
        ("{1: 'a'}", {"1": "a"}),
        ("{true: 'a'}", {"true": "a"}),
        ("type(1)", "int"),
        ("1u", 1),
    ],
)
def test_results_are_plain_json(src: str, expected: Any) -> None:
    assert evaluate(src, {}) == expected


def test_references() -> None:
    refs = references(
        "activities.reserve.output.id + activities['pay'].output"
        " + inputs.tags.map(t, t + inputs.name).size() + execution.id + item"
    )
    assert refs.roots == {"activities", "inputs", "execution", "item"}
    assert refs.activities == {"reserve", "pay"}
    assert refs.inputs == {"tags", "name"}
    assert refs.execution == {"id"}
    assert refs.dynamic == {"item"}


def test_comprehension_variables_are_scoped() -> None:
    assert references("[1].map(x, x) + [x]").roots == {"x"}
    assert references("[1].exists(a, [2].all(b, a < b))").roots == frozenset()
    assert references("inputs.tags.filter(t, has(inputs.name))").roots == {"inputs"}


def test_dynamic_activity_access_is_flagged() -> None:
    refs = references("activities[inputs.which].output")
    assert refs.dynamic == {"activities"}
    assert refs.activities == frozenset()
    assert references("size(activities)").dynamic == {"activities"}


def test_template_re_and_sources() -> None:
    assert TEMPLATE_RE.findall("a ${{ x }} b ${{y}}") == [" x ", "y"]
    assert template_sources("${{ a }} and ${{ b }}") == [" a ", " b "]
    with pytest.raises(ExpressionError, match="unterminated"):
        template_sources("${{ a }} and ${{ b")


def test_iter_expressions() -> None:
    value = {"a": ["${{ x }} and ${{ y }}", {"b": "${{ z }}"}], "c": 1, "d": "plain"}
    assert [s.strip() for s in iter_expressions(value)] == ["x", "y", "z"]


@pytest.mark.parametrize(
    ("when", "expected"),
    [
        (None, True),
        (True, True),
        (False, False),
        ("${{ inputs.n > 2 }}", True),
        ("${{ activities.skipped.status == 'skipped' }}", True),
        ("${{ inputs.tags.exists(t, t == 'z') }}", False),
    ],
)
def test_conditions(when: str | bool | None, expected: bool) -> None:
    assert evaluate_condition(when, CONTEXT, where="activity 'a' field when") is expected


@pytest.mark.parametrize(
    ("when", "message"),
    [
        ("${{ inputs.n }}", "must give true or false, not a number"),
        ("${{ inputs.name }}", "not a string"),
        ("inputs.n > 2", "must be true, false or a single"),
        ("${{ true }} ${{ true }}", "must be true, false or a single"),
    ],
)
def test_conditions_must_be_booleans(when: str, message: str) -> None:
    with pytest.raises(ExpressionError, match=message):
        evaluate_condition(when, CONTEXT, where="activity 'a' field when")


@pytest.mark.parametrize(
    ("src", "message"),
    [
        ("''.__class__.__mro__", "names starting with '__' are not allowed"),
        ("inputs.__dict__", "names starting with '__' are not allowed"),
        ("range(10**9) | list", "invalid expression"),
        ("'a' * 10**9", "invalid expression"),
        ("[1].map(a, [1].map(b, [1].map(c, c)))", "nested 3 deep (limit 2)"),
        ("[1].map(inputs, inputs)", "hides a context name"),
        ("x" * 5000, "5000 characters long"),
        ("   ", "empty expression"),
        ("now()", "unknown function 'now'"),
        ("'a'.startswith('a')", "did you mean 'startsWith'?"),
    ],
)
def test_static_checks(src: str, message: str) -> None:
    with pytest.raises(ExpressionError) as info:
        compile_expression(src, where="activity 'a' field set.v")
    assert message in str(info.value)
    assert str(info.value).startswith("activity 'a' field set.v: ")


def test_no_clock_filesystem_or_imports_are_reachable() -> None:
    for src in ("now()", "open('/etc/passwd')", "import('os')", "getattr(inputs, 'x')"):
        with pytest.raises(ExpressionError):
            evaluate(src, CONTEXT)


def test_compiles_are_cached_per_source() -> None:
    assert compile_expression("inputs.n + 41") is compile_expression("inputs.n + 41")
    assert compile_expression("${{ inputs.n }}").source == "inputs.n"


def test_result_size_is_bounded() -> None:
    big = "x" * (MAX_RESULT_BYTES // 2 + 1)
    context = {"inputs": {"big": big}}
    assert evaluate("inputs.big", context) == big
    with pytest.raises(ExpressionError, match="bytes as JSON"):
        evaluate("inputs.big + inputs.big", context)
    with pytest.raises(ExpressionError, match="bytes as JSON"):
        render("${{ inputs.big }}${{ inputs.big }}", context)


def test_comprehension_work_is_bounded_before_running() -> None:
    items = list(range(2000))
    context = {"inputs": {"items": items}}
    assert evaluate("inputs.items.exists(x, x == 1999)", context) is True
    assert len(evaluate("inputs.items.map(x, x * 2)", {"inputs": {"items": items[:1000]}})) == 1000
    with pytest.raises(ExpressionError, match="too much work"):
        evaluate("inputs.items.map(x, inputs.items.filter(y, y < x).size())", context)


def test_deeply_nested_data_is_refused_instead_of_crashing() -> None:
    deep: list[Any] = []
    cursor = deep
    for _ in range(expr.MAX_DATA_DEPTH + 5):
        cursor.append([])
        cursor = cursor[0]
    with pytest.raises(ExpressionError, match="nested more than"):
        evaluate("size(inputs.deep)", {"inputs": {"deep": deep}})


def test_only_the_roots_read_are_converted() -> None:
    # An unconvertible value elsewhere in the context does not matter.
    context = {"inputs": {"n": 1}, "activities": {"other": {"output": object()}}}
    assert evaluate("inputs.n", context) == 1
    with pytest.raises(ExpressionError):
        evaluate("activities.other.output", context)
