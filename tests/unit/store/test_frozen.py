"""A `record` compares, hashes, shows and refuses changes as `@dataclass(frozen=True)` does:
each case is checked against the same class declared with the dataclass decorator."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import pytest

from wovyr.store.frozen import record
from wovyr.store.records import ExecutionRecord


def twins() -> tuple[type[Any], type[Any]]:
    """The same fields (defaults, a factory, a field out of compare, hash and repr) as a
    record and as a frozen dataclass."""

    def body() -> dict[str, Any]:
        return {
            "__annotations__": {"a": "int", "b": "str", "c": "list[int]", "d": "int", "e": "int"},
            "b": "x",
            "c": field(default_factory=list, hash=False),
            "d": field(default=0, compare=False),
            "e": field(default=0, repr=False),
            "__module__": __name__,
            "__qualname__": "Shape",
        }

    mine = record(type("Shape", (), body()))
    theirs = dataclass(frozen=True)(type("Shape", (), body()))
    return mine, theirs


def test_equality_hash_and_repr_are_the_dataclass_ones() -> None:
    mine, theirs = twins()
    cases = [
        ({"a": 1}, {"a": 1}),
        ({"a": 1}, {"a": 2}),
        ({"a": 1, "b": "y"}, {"a": 1}),
        ({"a": 1, "d": 5}, {"a": 1, "d": 6}),  # d is not compared
        ({"a": 1, "e": 5}, {"a": 1, "e": 6}),
        ({"a": 1, "c": [1]}, {"a": 1, "c": [1]}),
        ({"a": 1, "c": [1]}, {"a": 1, "c": [2]}),
    ]
    for left, right in cases:
        assert (mine(**left) == mine(**right)) == (theirs(**left) == theirs(**right))
        assert (mine(**left) != mine(**right)) == (theirs(**left) != theirs(**right))
        assert repr(mine(**left)) == repr(theirs(**left))
        assert hash(mine(**left)) == hash(theirs(**left))  # c is not hashed: its list is fine
    assert mine(a=1).__eq__(theirs(a=1)) is NotImplemented  # another class: never equal
    assert mine(a=1) != (1, "x", [], 0, 0)
    assert {mine(a=1), mine(a=1, d=9)} == {mine(a=1)}  # equal records are one set member


def test_it_is_frozen_and_a_dataclass() -> None:
    mine, theirs = twins()
    one = mine(a=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        one.a = 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        del one.a
    assert [f.name for f in dataclasses.fields(mine)] == ["a", "b", "c", "d", "e"]
    assert dataclasses.replace(one, a=2) == mine(a=2)
    assert dataclasses.asdict(one) == dataclasses.asdict(theirs(a=1))
    assert mine.__match_args__ == theirs.__match_args__


def test_a_record_of_itself_shows_as_the_dataclass_does() -> None:
    mine, theirs = twins()
    loop, theirs_loop = mine(a=1, c=[]), theirs(a=1, c=[])
    loop.c.append(loop)
    theirs_loop.c.append(theirs_loop)
    assert repr(loop) == repr(theirs_loop) == "Shape(a=1, b='x', c=[...], d=0)"


def test_store_records_are_records() -> None:
    """The store's records compare by value and are frozen, as before."""
    row = ExecutionRecord(
        id="e", tenant="t", workflow="w", version="1", definition_hash="h",
        status="running", created_at=None, updated_at=None, seq=1,  # type: ignore[arg-type]
    )  # fmt: skip
    assert row == dataclasses.replace(row) and row is not dataclasses.replace(row)
    assert ExecutionRecord.__eq__ is not object.__eq__
    assert repr(row).startswith("ExecutionRecord(id='e', tenant='t', workflow='w'")
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.status = "completed"  # type: ignore[misc]
