"""`record`: a frozen dataclass whose `__eq__`, `__hash__` and `__repr__` are shared functions.

`@dataclass(frozen=True)` compiles six methods for each class when its module is imported
(`__init__`, `__repr__`, `__eq__`, `__hash__`, `__setattr__`, `__delattr__`). The store
declares some eighty records and every command that opens a store imports them all, so
that compiling is a good part of what a read (`wovyr workflows show`) costs. A `record`
gets `__init__` and the frozen `__setattr__`/`__delattr__` from `dataclass` as before, and
equality, hash and repr from the functions below, which do what the generated ones do
(the same fields, compared, hashed and shown in the same way), reading the class's fields
once. (tests/unit/store/test_frozen.py holds them to the generated ones.)
"""

from __future__ import annotations

import reprlib
from dataclasses import Field, dataclass, field, fields
from typing import Any, TypeVar, dataclass_transform

__all__ = ["record"]

_C = TypeVar("_C")

# per class: the names of its compared, hashed and shown fields
_SHAPES: dict[type, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {}


def _shape(cls: type) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    shape = _SHAPES.get(cls)
    if shape is None:
        declared = fields(cls)
        compared = tuple(f.name for f in declared if f.compare)
        hashed = tuple(f.name for f in declared if (f.compare if f.hash is None else f.hash))
        shown = tuple(f.name for f in declared if f.repr)
        shape = _SHAPES[cls] = (compared, hashed, shown)
    return shape


def _eq(self: Any, other: Any) -> Any:
    if other.__class__ is self.__class__:
        names = _shape(self.__class__)[0]
        return tuple(getattr(self, n) for n in names) == tuple(getattr(other, n) for n in names)
    return NotImplemented


def _hash(self: Any) -> int:
    return hash(tuple(getattr(self, n) for n in _shape(self.__class__)[1]))


@reprlib.recursive_repr()
def _repr(self: Any) -> str:
    shown = ", ".join(f"{n}={getattr(self, n)!r}" for n in _shape(self.__class__)[2])
    return f"{self.__class__.__qualname__}({shown})"


@dataclass_transform(frozen_default=True, field_specifiers=(field, Field))
def record(cls: type[_C], /) -> type[_C]:
    """`@dataclass(frozen=True)`, its equality, hash and repr shared."""
    cls.__eq__ = _eq  # type: ignore[method-assign]
    cls.__hash__ = _hash  # type: ignore[method-assign]
    cls.__repr__ = _repr  # type: ignore[method-assign]
    return dataclass(frozen=True, eq=False, repr=False)(cls)
