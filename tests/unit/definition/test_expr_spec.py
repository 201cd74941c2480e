"""The CEL behaviours workflows rely on, as the CEL specification (cel-spec langdef.md and its
conformance suite, tests/simple/testdata) defines them; each row names the conformance test it
mirrors where there is one. bench/bench_expr.py runs the whole suite against the runtimes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from wovyr.definition.expr import (
    MAX_NESTING,
    compile_expression,
    duration_text,
    evaluate,
    timestamp_text,
)
from wovyr.errors import ExpressionError

TS = "timestamp('2009-02-13T23:31:30Z')"


@pytest.mark.parametrize(
    ("src", "expected"),
    [
        # string/size/unicode: size counts code points, not UTF-8 bytes
        ("size('πέντε')", 5),
        ("size('A')", 1),
        ("'πέντε'.size()", 5),
        ("size(b'\\xff\\x00')", 2),
        # macros/exists/list_elem_error_shortcircuit and all/list_elem_error_shortcircuit:
        # a comprehension that finds its answer absorbs errors on other elements
        ("[0, 1].exists(x, 1 / x > 0)", True),
        ("[1, 0].all(x, 1 / x < 0)", False),
        ("[0, 1].all(x, 1 / x > 0) || true", True),
        # logic: && and || absorb errors in either order (commutative short-circuit)
        ("1 / 0 > 0 || true", True),
        ("false && 1 / 0 > 0", False),
        ("1 / 0 > 0 && false", False),
        # conversions: the standard overloads
        (f"int({TS})", 1234567890),
        ("string(true)", "true"),
        ("string(false)", "false"),
        ("bool('true')", True),
        ("bool('0')", False),
        ("int('-42')", -42),
        ("uint(42)", 42),
        ("double('2.5')", 2.5),
        ("string(b'abc')", "abc"),
        ("bytes('ÿ')", "w78="),
        (f"string({TS})", "2009-02-13T23:31:30Z"),
        ("string(duration('1000000s'))", "1000000s"),
        ("string(1.5)", "1.5"),
        ("dyn(1) == 1.0", True),
        # comparisons: heterogeneous numeric equality and ordering on dynamic values
        ("dyn(1) < 1.5", True),
        ("dyn(1u) == 1", True),
        ("dyn({1: 'a'})[1.0]", "a"),
        ("dyn(2.0) in [1, 2]", True),
        # timestamps: accessors in UTC and in a named or fixed-offset time zone
        (f"{TS}.getHours()", 23),
        (f"{TS}.getHours('America/Los_Angeles')", 15),
        (f"{TS}.getDayOfWeek('+11:00')", 6),
        (f"{TS}.getDate('Australia/Sydney')", 14),
        (f"{TS}.getMonth()", 1),
        (f"{TS}.getFullYear()", 2009),
        ("duration('123.321s').getMilliseconds()", 321),
        ("duration('3730s').getHours()", 1),
        (f"{TS} + duration('1h')", "2009-02-14T00:31:30Z"),
        (f"duration('1h') + {TS}", "2009-02-14T00:31:30Z"),
        # results: durations and timestamps exactly as CEL's string() writes them
        ("timestamp('2026-01-15T00:00:00Z') - timestamp('2026-01-01T00:00:00Z')", "1209600s"),
        ("duration('123456.789s')", "123456.789s"),
        ("duration('-1.5s')", "-1.500s"),
        ("duration('0.000001s')", "0.000001s"),
        ("timestamp('2026-01-01T10:00:00.25+02:00')", "2026-01-01T08:00:00.250Z"),
        # type values are CEL's type names
        ("type(1)", "int"),
        ("type(1u)", "uint"),
        ("type([])", "list"),
        ("type({})", "map"),
        ("type(null)", "null_type"),
        (f"type({TS})", "google.protobuf.Timestamp"),
        ("type(1) == int", True),
        # fields: quoted field names select keys that are not identifiers
        ("{'content-type': 'json'}.`content-type`", "json"),
        ("has({'a': 1}.a)", True),
        ("'a' in {'a': 1}", True),
    ],
)
def test_specified_results(src: str, expected: Any) -> None:
    assert evaluate(src, {}) == expected


@pytest.mark.parametrize(
    ("src", "message"),
    [
        # integer_math/int64_min_negate and friends: overflow is an error, never a wrap
        ("-(-9223372036854775807 - 1)", "overflow"),
        ("9223372036854775807 + 1", "overflow"),
        ("-9223372036854775807 - 2", "overflow"),
        ("0u - 1u", "overflow"),
        ("int(18446744073709551615u)", "range"),
        # conversions/string/bytes_invalid: invalid UTF-8 is an error, not U+FFFD
        ("string(b'\\x00\\xff')", "UTF-8"),
        # timestamps/timestamp_range and duration_range: values stay in range
        ("timestamp('9999-12-31T23:59:59Z') + duration('1s')", "timestamp overflow"),
        ("duration('320000000000s')", "above maximum allowed duration"),
        ("timestamp('2009-02-13T23:31:30Z').getHours('Mars/Olympus')", "timezone"),
        # errors on values
        ("1 / 0", "division by zero"),
        ("1 % 0", "modulo by zero"),
        ("[1][3]", "index out of bounds"),
        ("{'a': 1}.b", "no such key: 'b'"),
        ("'abc'.matches('[')", "regular expression"),
        ("bool('maybe')", "bool"),
    ],
)
def test_specified_errors(src: str, message: str) -> None:
    with pytest.raises(ExpressionError) as info:
        evaluate(src, {})
    assert message.lower() in str(info.value).lower()


@pytest.mark.parametrize(
    ("src", "message"),
    [
        # integer_math/unary_minus_not_bool: no overload; refused when the workflow is checked
        ("-false", "no matching overload for 'unary -' applied to '(bool)'"),
        ("'a' * 3", "no matching overload for '*'"),
        ("1 + 'a'", "no matching overload for '+'"),
        ("!1", "no matching overload for 'unary !'"),
        ("size(1)", "no matching overload"),
    ],
)
def test_type_errors_in_literals_are_found_at_compile_time(src: str, message: str) -> None:
    with pytest.raises(ExpressionError) as info:
        compile_expression(src, where="activity 'a' field set.v")
    assert message in str(info.value)
    assert "column" in str(info.value)


def test_data_of_any_type_is_checked_when_it_arrives() -> None:
    context = {"inputs": {"name": "Ada", "n": 3, "flag": True}}
    with pytest.raises(ExpressionError) as info:
        evaluate("inputs.name + inputs.n", context)
    assert "Unsupported operation: +(string, int) is not defined" in str(info.value)
    assert info.value.hint and "convert explicitly" in info.value.hint
    with pytest.raises(ExpressionError, match="unary -"):
        evaluate("-inputs.flag", context)
    assert evaluate("inputs.n == 3.0", context) is True


def test_a_missing_name_is_reported_by_name() -> None:
    with pytest.raises(ExpressionError) as info:
        evaluate("item.sku", {"inputs": {}})
    assert str(info.value).startswith("Undefined variable 'item'")


def test_data_that_is_not_json_is_refused_by_name() -> None:
    with pytest.raises(ExpressionError, match=r"'inputs' holds a Python object"):
        evaluate("inputs", {"inputs": object()})


def test_nesting_is_bounded_with_a_clear_message() -> None:
    ok = " + ".join(["inputs.a"] * (MAX_NESTING - 1))
    assert evaluate(ok, {"inputs": {"a": "x"}}) == "x" * (MAX_NESTING - 1)
    for src in (
        " + ".join(["inputs.a"] * (MAX_NESTING + 8)),
        "[" * (MAX_NESTING + 1) + "]" * (MAX_NESTING + 1),
        "(" * 600 + "1" + ")" * 600,
    ):
        with pytest.raises(ExpressionError) as info:
            compile_expression(src)
        assert f"nested more than {MAX_NESTING} levels deep" in str(info.value)
        assert info.value.hint and "'set' activity" in info.value.hint


def test_logical_chains_are_not_nesting() -> None:
    src = " && ".join(["inputs.b"] * 200)
    assert evaluate(src, {"inputs": {"b": True}}) is True


@pytest.mark.parametrize(
    ("src", "items", "allowed"),
    [
        ("inputs.xs.all(x, x in inputs.xs)", 8000, False),  # quadratic: refused before running
        ("inputs.xs.all(x, x in inputs.xs)", 1000, True),
        ("inputs.xs.exists(x, size(inputs.xs + inputs.xs) == 0)", 2000, False),
        ("inputs.xs.exists(x, inputs.s.contains('b'))", 2000, False),
        ("inputs.xs.map(x, x + 1).size()", 500, True),  # constant work per element
        ("inputs.xs.exists(x, x == 7)", 100_000, True),
    ],
)
def test_the_cost_bound_covers_work_linear_in_a_collection(
    src: str, items: int, allowed: bool
) -> None:
    context = {"inputs": {"xs": list(range(items)), "s": "a"}}
    if allowed:
        evaluate(src, context)
    else:
        with pytest.raises(ExpressionError, match="too much work"):
            evaluate(src, context)


def test_the_cost_estimate_knows_which_operations_are_linear() -> None:
    assert compile_expression("inputs.xs.map(l, l.qty + 1)").linear_depth == 0
    assert compile_expression("inputs.xs.map(l, l.price + l.tax)").linear_depth == 0
    assert compile_expression("inputs.xs.map(x, x in inputs.ys)").linear_depth == 2
    assert compile_expression("inputs.xs.map(x, x + inputs.ys)").linear_depth == 2
    assert compile_expression("inputs.xs.all(x, inputs.ys.all(y, y in x))").linear_depth == 3
    assert compile_expression("1 in inputs.xs").linear_depth == 0


def test_duration_and_timestamp_text() -> None:
    assert duration_text(timedelta(days=14)) == "1209600s"
    assert duration_text(timedelta(seconds=123456, microseconds=789000)) == "123456.789s"
    assert duration_text(timedelta(microseconds=-1)) == "-0.000001s"
    assert duration_text(timedelta(0)) == "0s"
    assert timestamp_text(datetime(1, 1, 1, tzinfo=UTC)) == "0001-01-01T00:00:00Z"
    assert timestamp_text(datetime(2026, 1, 1, 0, 0, 0, 123456, tzinfo=UTC)).endswith("00.123456Z")


def test_type_names_are_not_free_names() -> None:
    assert compile_expression("type(inputs.x) == string || type(inputs.x) == int").refs.roots == {
        "inputs"
    }
