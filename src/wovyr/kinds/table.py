"""The table of declared activity kinds: what the workflow language and the decider know of
a kind, apart from what runs it (`wovyr.activities.kinds.ActivityKind` adds that).

A `Declaration` is pure data: the keys the kind owns in an activity (its pydantic `model`),
the `spec` builder (the part of a validated step rendered before an attempt), how it settles
(`settle`), its default attempts, whether it may compensate, run per item, repeat a lost
attempt, and read secrets. Parsing, validation, the schema and the decider read only this.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel

from wovyr.errors import ConfigError

__all__ = ["DECLARED", "Declaration", "KindTable", "Settle", "declare"]

Settle = Literal["worker", "value", "wait"]


@dataclass(frozen=True, kw_only=True)
class Declaration:
    name: str  # the key that selects the kind in an activity
    model: type[BaseModel]  # the keys the kind owns in an activity (the selecting key among them)
    spec: Callable[[Any], Any]  # the part of a step rendered with expressions before an attempt
    settle: Settle = "worker"  # "value", "wait": the decider settles it, no worker runs it
    description: str = ""
    default_attempts: int = 3  # attempts when the activity has no `retry`
    compensates: bool = True  # may undo another activity (`compensate: {<kind>: ...}`)
    per_item: bool = True  # may run once per item of a `for_each`
    repeat_lost: bool = False  # a lost attempt is repeated (its start is idempotent), not counted
    secrets: bool = False  # its input may reference `${{ secrets.NAME }}`

    def __post_init__(self) -> None:
        if self.name not in self.keys:
            raise ConfigError(
                f"activity kind {self.name!r}: its model {self.model.__name__} has no field "
                f"named (or aliased) {self.name!r}"
            )
        if self.secrets and self.settle != "worker":
            raise ConfigError(
                f"activity kind {self.name!r}: only a kind run in a worker may read secrets"
            )
        if self.default_attempts < 1:
            raise ConfigError(f"activity kind {self.name!r}: default_attempts must be >= 1")

    @property
    def declaration(self) -> Declaration:
        """The declared part alone (of a kind that also says how it runs)."""
        return Declaration(**{f.name: getattr(self, f.name) for f in fields(Declaration)})

    @property
    def keys(self) -> tuple[str, ...]:
        """The activity keys this kind owns (field aliases where they have one)."""
        return tuple(f.alias or name for name, f in self.model.model_fields.items())

    def json_schema(self) -> dict[str, Any]:
        """This kind's schema fragment: the JSON Schema of its model (draft 2020-12)."""
        return self.model.model_json_schema(by_alias=True, mode="validation")


K = TypeVar("K", bound=Declaration)


class KindTable(Generic[K]):
    """Kinds by the key that selects them. Reads are lock-free (a change swaps the whole
    mapping); changes are made at import (under the import lock) or through
    `wovyr.activities.kinds.KINDS`, which serializes them (this module takes no lock: the
    decider imports it)."""

    def __init__(self) -> None:
        self._kinds: dict[str, K] = {}
        self._owner: dict[str, str] = {}  # activity key -> the kind that owns it

    def register(self, kind: K) -> K:
        existing = self._kinds.get(kind.name)
        if existing is not None and existing != kind:
            raise ConfigError(f"activity kind {kind.name!r} is already registered")
        taken = [k for k in kind.keys if self._owner.get(k, kind.name) != kind.name]
        if taken:
            raise ConfigError(f"activity kind {kind.name!r}: keys {taken} belong to another kind")
        kinds = dict(self._kinds)
        kinds[kind.name] = kind
        owner = dict(self._owner)
        owner.update(dict.fromkeys(kind.keys, kind.name))
        self._kinds, self._owner = kinds, owner  # swapped whole: readers take no lock
        return kind

    def unregister(self, name: str) -> None:
        self._kinds = {k: v for k, v in self._kinds.items() if k != name}
        self._owner = {k: v for k, v in self._owner.items() if v != name}

    @contextmanager
    def registered(self, kind: K) -> Iterator[K]:
        """Register `kind` for the duration of a `with` block (tests, plugins' checks)."""
        self.register(kind)
        try:
            yield kind
        finally:
            self.unregister(kind.name)

    def get(self, name: str) -> K:
        try:
            return self._kinds[name]
        except KeyError:
            raise ConfigError(
                f"no activity kind {name!r} is registered",
                hint=f"registered kinds: {', '.join(self.names())}",
            ) from None

    def names(self) -> list[str]:
        return list(self._kinds)

    def kinds(self) -> list[K]:
        return list(self._kinds.values())

    def owner_of(self, key: str) -> str | None:
        """The kind that owns activity key `key` (`with` -> `tool`), or None."""
        return self._owner.get(key)


#: What the language knows of every kind (built-in ones and those registered with their
#: executors through `wovyr.activities.kinds.register_kind`).
DECLARED: KindTable[Declaration] = KindTable()


def declare(kind: Declaration) -> Declaration:
    """Add `kind` to the declared kinds (idempotent for the same declaration); returns it."""
    return DECLARED.register(kind.declaration)
