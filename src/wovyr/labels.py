"""The rules of labels (`key: value` texts for search): at most MAX_LABELS, keys of 1-63
characters of a small alphabet, values of at most MAX_VALUE printable characters.

Every label is an index row and travels with each listed execution, so they stay few and
short wherever they are written: a definition's `labels` (checked where the document is
accepted, with the file, line and column: a value that is an expression is checked when it
is rendered), and an execution's labels (checked at every start: a request's, a child's, a
schedule's, a rerun's, a continued run's; `wovyr.engine.labels`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["KEY_RULE", "MAX_LABELS", "MAX_VALUE", "label_problems"]

MAX_LABELS = 32
MAX_VALUE = 200
_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-/]{0,62}")
KEY_RULE = "1-63 characters: letters, digits, '_', '.', '-', '/', starting with a letter or digit"


def label_problems(
    labels: Mapping[Any, Any], *, rendered: bool = True
) -> Iterator[tuple[str, Any, str | None]]:
    """(message, the key it is about or None for the whole, hint) for each rule `labels`
    breaks; `rendered` False: values holding `${{` are expressions, checked once rendered."""
    if len(labels) > MAX_LABELS:
        yield f"at most {MAX_LABELS} labels, not {len(labels)}", None, None
    for key, value in labels.items():
        if not isinstance(key, str) or _KEY.fullmatch(key) is None:
            yield f"label key {key!r} is refused", key, KEY_RULE
            continue
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            yield f"label {key!r} must be a string, not {type(value).__name__}", key, None
            continue
        text = str(value)
        if not rendered and "${{" in text:
            continue
        if len(text) > MAX_VALUE or any(ord(ch) < 32 for ch in text):
            yield f"label {key!r} must be at most {MAX_VALUE} printable characters", key, None
