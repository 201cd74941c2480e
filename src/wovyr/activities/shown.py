"""What a reader needs of each built-in activity kind to show an execution, apart from the
kind's model and executor: its default attempts (an activity without `retry`) and how its
rendered input is shown (`redact`: credentials in known fields masked even when they hold
literals). `wovyr workflows show|list|history` read stored definitions with this alone
(`wovyr.engine.outline`), importing neither the workflow language nor any executor.

The `http` and `shell` kinds register their `redact` from here; the default attempts repeat
their declarations' (`wovyr.kinds.steps`, which the language's layer keeps apart from this
one), and tests/unit/activities/test_shown_kinds.py checks this table against the registered
kinds. A kind not in it (one an activity module registers) is read through the language.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from wovyr.activities.redact import mask

__all__ = ["BUILTIN_KINDS", "SENSITIVE_HEADERS", "ShownKind", "redact_http", "redact_shell"]

#: Request headers that carry credentials: masked wherever a step's input is shown, even
#: when they hold literals (a secret reference is shown as written: it reveals no value).
SENSITIVE_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "x-api-key"})


def redact_http(rendered: Any) -> Any:
    """An `http` step's rendered input as shown: its credential headers masked."""
    if not isinstance(rendered, dict) or not isinstance(rendered.get("headers"), dict):
        return rendered
    headers = {
        name: mask(value) if name.lower() in SENSITIVE_HEADERS else value
        for name, value in rendered["headers"].items()
    }
    return {**rendered, "headers": headers}


def redact_shell(rendered: Any) -> Any:
    """A `shell` step's rendered input as shown: `env` entries named in `secret_env` masked
    (literals too)."""
    if not isinstance(rendered, dict) or not isinstance(rendered.get("env"), dict):
        return rendered
    marked = set(rendered.get("secret_env") or ())
    env = {k: mask(v) if k in marked else v for k, v in rendered["env"].items()}
    return {**rendered, "env": env}


@dataclass(frozen=True)
class ShownKind:
    """A built-in kind as a reader needs it."""

    name: str  # the key that selects the kind in an activity
    default_attempts: int = 3  # attempts when the activity has no `retry`
    redact: Callable[[Any], Any] | None = None  # its rendered input as it may be shown


#: The built-in kinds by the key that selects them (children and waits run once unless asked).
BUILTIN_KINDS: dict[str, ShownKind] = {
    kind.name: kind
    for kind in (
        ShownKind("tool"),
        ShownKind("http", redact=redact_http),
        ShownKind("shell", redact=redact_shell),
        ShownKind("set"),
        ShownKind("wait", default_attempts=1),
        ShownKind("workflow", default_attempts=1),
        ShownKind("llm"),
        ShownKind("agent"),
        ShownKind("mcp"),
        ShownKind("memory"),
    )
}
