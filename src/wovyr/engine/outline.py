"""What a view of an execution needs of its definition, and how it is read from the stored
definition without the workflow language.

An execution's view (`wovyr.engine.views`) lists the definition's activities in order, each
with its kind, its `needs`, its attempts (its `retry`'s, or its kind's default), its
`repeat`'s `max_iterations`, whether it can be compensated, and how its rendered input is
shown (the kind's `redact`). That is an `Outline`. The engine makes it from the definition's
model (`wovyr.engine.definitions.outline_of`); a reader that has only a store
(`wovyr workflows show|list|history`) reads it from the canonical JSON the definition is
stored as (`outline_from_source`): pydantic models are not built, and no executor is
imported. Where that JSON is not what the model writes (a definition stored as its source
text by an older release) or names a kind `wovyr.activities.shown` does not know, the reader
answers None and the caller reads the definition through the language.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from wovyr.activities.shown import BUILTIN_KINDS

__all__ = ["ActivityOutline", "Outline", "outline_from_source"]

_ATTEMPTS = 3  # of a `retry` that leaves out `max_attempts` (`RetryPolicy`'s default)
_ITERATIONS = 100  # of a `repeat` that leaves out `max_iterations` (`RepeatSpec`'s)


@dataclass(frozen=True)
class ActivityOutline:
    """One activity of a definition as its execution's view shows it."""

    id: str
    kind: str
    needs: list[str]
    max_attempts: int
    max_iterations: int | None  # of a `repeat`
    compensable: bool
    redact: Callable[[Any], Any] | None  # its rendered input as it may be shown

    def shown_input(self, value: Any) -> Any:
        """A rendered input of this activity as it may be shown (its kind's `redact`)."""
        return value if self.redact is None or value is None else self.redact(value)


@dataclass(frozen=True)
class Outline:
    """The activities of a definition, in its order."""

    activities: tuple[ActivityOutline, ...]

    @cached_property
    def _by_id(self) -> dict[str, ActivityOutline]:
        return {act.id: act for act in self.activities}

    def activity(self, activity_id: str) -> ActivityOutline:
        """The activity `activity_id`; KeyError when the definition has none so named."""
        return self._by_id[activity_id]


def outline_from_source(source: str) -> Outline | None:
    """The outline of a definition stored as `source` (its canonical JSON), or None when
    it cannot be read without the language (see the module's docstring)."""
    try:
        data = json.loads(source)
    except ValueError:  # the source text of a document (YAML)
        return None
    activities = data.get("activities") if isinstance(data, dict) else None
    if not isinstance(activities, list):
        return None
    found = [_activity(a) for a in activities]
    known = [a for a in found if a is not None]
    return Outline(tuple(known)) if len(known) == len(found) else None


def _activity(data: Any) -> ActivityOutline | None:
    if not isinstance(data, dict):
        return None
    kinds = [BUILTIN_KINDS[key] for key in data if key in BUILTIN_KINDS]
    ident, needs = data.get("id"), data.get("needs", [])
    retry, repeat = data.get("retry"), data.get("repeat")
    if len(kinds) != 1 or not isinstance(ident, str) or not _texts(needs):
        return None
    (kind,) = kinds
    attempts = kind.default_attempts if retry is None else _count(retry, "max_attempts", _ATTEMPTS)
    iterations = None if repeat is None else _count(repeat, "max_iterations", _ITERATIONS)
    if attempts is None or (repeat is not None and iterations is None):
        return None
    return ActivityOutline(
        id=ident,
        kind=kind.name,
        needs=list(needs),
        max_attempts=attempts,
        max_iterations=iterations,
        compensable=data.get("compensate") is not None,
        redact=kind.redact,
    )


def _texts(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _count(spec: Any, key: str, default: int) -> int | None:
    """`spec[key]` (`default` when left out: the model leaves out its defaults); None when
    it is not a whole number as the model writes it."""
    if not isinstance(spec, Mapping):
        return None
    value = spec.get(key, default)
    return value if type(value) is int else None
