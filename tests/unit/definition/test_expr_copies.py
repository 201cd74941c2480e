"""The bound on data an expression converts or builds (MAX_COPY_BYTES), and the cap on the
number of activities in a definition: each refuses what used to stall a worker for seconds,
and lets the ordinary case through."""

from __future__ import annotations

import pytest

from wovyr.definition.expr import MAX_COPY_BYTES, MAX_RESULT_BYTES, evaluate
from wovyr.definition.expr_static import analyse
from wovyr.definition.parse import MAX_ACTIVITIES, Limits, load_definition
from wovyr.errors import DefinitionError, ExpressionError

HEADER = "apiVersion: wovyr/v1\nkind: Workflow\nmetadata: {name: big}\nactivities:\n"


def test_the_analysis_names_what_map_bodies_read_from_outside_their_element() -> None:
    info = analyse("inputs.xs.map(x, inputs.s + x)")
    assert info.map_reads == {("inputs", "s")} and info.map_read_depth == 1
    assert analyse("inputs.xs.filter(x, x in inputs.ys)").map_reads == set()
    nested = analyse("inputs.xs.map(x, inputs.ys.map(y, activities[inputs.k]))")
    assert ("activities", None) in nested.map_reads and nested.map_read_depth == 2


def test_a_map_copying_a_large_string_into_every_item_is_refused_before_running() -> None:
    data = {"inputs": {"xs": list(range(1400)), "s": "a" * 600_000}}
    with pytest.raises(ExpressionError, match="convert or build too much data"):
        evaluate("inputs.xs.map(x, inputs.s)", data)


def test_a_map_reading_small_values_from_outside_its_element_runs() -> None:
    data = {"inputs": {"xs": list(range(1000)), "rate": 2, "s": "a" * 600_000}}
    assert evaluate("inputs.xs.map(x, x * inputs.rate)", data)[-1] == 1998


def test_a_long_concatenation_of_large_data_is_refused_and_a_short_one_runs() -> None:
    data = {"inputs": {"s": "a" * 900_000}}
    with pytest.raises(ExpressionError, match="convert or build too much data"):
        evaluate("inputs.s" + " + inputs.s" * 29, data)
    assert evaluate("size(inputs.s + inputs.s)", data) == 1_800_000


def test_reading_more_values_than_the_bound_allows_is_refused() -> None:
    many = [0] * (MAX_COPY_BYTES // 500 + 1)
    with pytest.raises(ExpressionError, match="convert or build too much data"):
        evaluate("size(inputs.xs)", {"inputs": {"xs": many}})
    assert evaluate("size(inputs.xs)", {"inputs": {"xs": many[:100_000]}}) == 100_000


def test_a_result_over_the_cap_is_refused_without_encoding_it_whole() -> None:
    data = {"inputs": {"s": "a" * (MAX_RESULT_BYTES // 2)}}
    with pytest.raises(ExpressionError, match="result is more than"):
        evaluate("inputs.s + inputs.s + inputs.s", data)


def test_a_definition_over_the_activity_cap_is_refused_where_its_activities_start() -> None:
    rows = "".join(f"  - {{id: a{i}, set: {{v: {i}}}}}\n" for i in range(MAX_ACTIVITIES + 1))
    with pytest.raises(DefinitionError) as caught:
        load_definition(HEADER + rows)
    (problem,) = caught.value.problems
    assert problem.message == f"the workflow has {MAX_ACTIVITIES + 1} activities (limit 500)"
    assert (problem.line, problem.path) == (4, "activities")
    assert len(load_definition(HEADER + rows, limits=Limits(max_activities=501)).activities) == 501
    assert len(load_definition(HEADER + rows.split("\n", 1)[1]).activities) == MAX_ACTIVITIES
