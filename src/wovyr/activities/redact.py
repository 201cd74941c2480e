"""Keeping credentials out of what is stored and shown.

- `mask`: a field known to hold a credential (an `Authorization` header, a shell `env`
  entry marked secret) as it may be shown: `***`, unless it is nothing but a secret
  reference (optionally after an auth scheme: `Bearer ${{ secrets.TOKEN }}`), which
  reveals no value.
- `scrub`: a value (an attempt's output or error) with every resolved secret value, in the
  encodings it is likely to be echoed in (plain, base64, URL-encoded, JSON-escaped),
  replaced by `***`: the last line of defence when an executor or a handler echoes what it
  was given.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote, quote_plus

__all__ = ["MASK", "MIN_SCRUBBED", "mask", "scrub", "secret_forms"]

MASK = "***"
MIN_SCRUBBED = 4  # shorter values are not hunted in text (they would mask ordinary words)
_SHOWN = re.compile(
    r"(?:(?:Bearer|Basic|Token|Bot)\s+)?\$\{\{\s*secrets\.[A-Za-z_][A-Za-z0-9_]*\s*\}\}"
)


def mask(value: Any) -> Any:
    if isinstance(value, str) and _SHOWN.fullmatch(value):
        return value
    return MASK


def secret_forms(values: Iterable[str]) -> list[str]:
    """Every form of `values` that `scrub` replaces, longest first."""
    forms: set[str] = set()
    for value in values:
        if len(value) < MIN_SCRUBBED:
            continue
        raw = value.encode("utf-8")
        forms.update(
            {
                value,
                base64.b64encode(raw).decode().rstrip("="),
                base64.urlsafe_b64encode(raw).decode().rstrip("="),
                quote(value, safe=""),
                quote_plus(value, safe=""),
                json.dumps(value)[1:-1],
                json.dumps(value, ensure_ascii=False)[1:-1],
            }
        )
    return sorted((f for f in forms if len(f) >= MIN_SCRUBBED), key=len, reverse=True)


def scrub(value: Any, forms: list[str]) -> Any:
    """`value` (JSON-like) with each of `forms` replaced by `***` in every string and key."""
    if not forms:
        return value
    if isinstance(value, str):
        for form in forms:
            if form in value:
                value = value.replace(form, MASK)
        return value
    if isinstance(value, Mapping):
        return {scrub(k, forms): scrub(v, forms) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub(v, forms) for v in value]
    return value
