"""What evaluating expressions costs, counted (`Costs`): the values of a context are measured
once however many evaluations read them, an expression that reads nothing that changes is
evaluated once, and the work of a call is added up so that the decider can bound it.

Before `Costs`, every evaluation walked all the data it read to check its cost: a `for_each`
of N items whose spec read an input of N values walked N * N values (a 300 KB start kept a
worker busy for a minute)."""

from __future__ import annotations

from wovyr.definition.expr import (
    _EVALUATION_BYTES,
    MAX_COPY_BYTES,
    PASS_WORK,
    Costs,
    items_work,
    render,
)

SPEC = {"v": "${{ item + inputs.xs[index] }}", "n": "${{ size(inputs.xs) }}"}


def item_contexts(n: int) -> tuple[dict[str, object], list[dict[str, object]]]:
    inputs = {"xs": [f"x{i}" for i in range(n)]}
    shared = {"inputs": inputs, "execution": {"id": "e"}}
    return shared, [{**shared, "item": f"i{i}", "index": i} for i in range(n)]


def test_the_shared_values_of_the_items_contexts_are_measured_once() -> None:
    n = 2000
    _, contexts = item_contexts(n)
    costs = Costs()
    rendered = [render(SPEC, ctx, costs=costs) for ctx in contexts]

    assert rendered[7] == {"v": "i7x7", "n": n}
    # `inputs` (1 map, 1 list, n strings) once, then one value per item: linear, where
    # measuring it for every item walked n * n values (4 million here)
    assert costs.walked <= (n + 2) + 2 * n
    # `size(inputs.xs)` reads no item: evaluated once, its value reused for every item
    assert costs.evaluations == n + 1


def test_other_objects_are_measured_again_and_values_never_cross_contexts() -> None:
    costs = Costs()
    a = render(SPEC, {"inputs": {"xs": ["a"]}, "item": "-", "index": 0}, costs=costs)
    b = render(SPEC, {"inputs": {"xs": ["b", "c"]}, "item": "-", "index": 0}, costs=costs)

    assert (a, b) == ({"v": "-a", "n": 1}, {"v": "-b", "n": 2})
    assert costs.evaluations == 4


def test_the_work_of_each_evaluation_is_added_up() -> None:
    _, contexts = item_contexts(100)
    costs = Costs(limit=PASS_WORK)
    for ctx in contexts[:10]:
        render(SPEC, ctx, costs=costs)

    # each item-reading evaluation converts `inputs` (100 short strings: about 52 KB as
    # the copy bound counts them) besides its own overhead
    assert 10 * (50_000 + _EVALUATION_BYTES) < costs.spent < 12 * (60_000 + _EVALUATION_BYTES)
    assert not costs.exhausted
    costs.limit = costs.spent
    assert costs.exhausted


def test_the_work_of_a_map_s_items_is_estimated_before_any_runs() -> None:
    shared, _ = item_contexts(2000)
    costs = Costs()
    work = items_work(SPEC, shared, 2000, costs)

    # one expression reads `item`/`index`: it converts `inputs` (about 1 MB as counted)
    # once per item; `size(inputs.xs)` is evaluated once and not counted
    assert 2000 * 1_000_000 < work < 2000 * 1_100_000
    assert items_work({"v": "${{ item }}"}, shared, 2000, costs) == 2000 * (
        costs.footprint(shared, {}).weight + _EVALUATION_BYTES
    )
    assert work > 16 * MAX_COPY_BYTES  # (refused by the decider: see test_bounded_decide)
