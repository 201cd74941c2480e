"""The table readers show executions with (`wovyr.activities.shown`) is the registered
kinds': every built-in kind, its default attempts as declared, its `redact` the one it
registers. A new built-in kind fails here until it is added there."""

from __future__ import annotations

import wovyr.activities.builtin  # noqa: F401  (registers the built-in kinds)
from wovyr.activities.kinds import KINDS
from wovyr.activities.shown import BUILTIN_KINDS
from wovyr.definition.model import Activity


def test_the_shown_kinds_are_the_registered_built_in_kinds() -> None:
    assert list(BUILTIN_KINDS) == KINDS.names()
    for name, shown in BUILTIN_KINDS.items():
        kind = KINDS.get(name)
        assert shown.name == name
        assert shown.default_attempts == kind.default_attempts, name
        assert shown.redact is kind.redact, name


def test_no_key_of_an_activity_is_named_as_a_kind() -> None:
    """The outline finds an activity's kind as its one key that names a kind."""
    own = {f.alias or n for n, f in Activity.model_fields.items()}
    assert own.isdisjoint(BUILTIN_KINDS)
