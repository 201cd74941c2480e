"""Keeping credentials out of what is stored and shown.

- `mask`: a field known to hold a credential (an `Authorization` header, a shell `env`
  entry marked secret) as it may be shown: `***`, unless it is nothing but a secret
  reference (optionally after an auth scheme: `Bearer ${{ secrets.TOKEN }}`), which
  reveals no value.
- `scrub`: a value (an attempt's output or error, its log lines) with every resolved secret
  value, in the encodings it is likely to be echoed in (`secret_forms`), replaced by `***`:
  the last line of defence when an executor or a handler echoes what it was given.

The encodings hunted: plain; JSON-escaped (ASCII or not); URL-encoded as a component
(`%2F`), as a form value (`+` for a space), as a path (urllib's default, and the WHATWG
path and query sets that httpx and browsers use); base64 and URL-safe base64, whole and
inside a longer encoded text (the three alignments: `Basic base64(user:secret)`); hex in
either case. A value shorter than `MIN_SECRET_CHARS` may not be stored as a secret
(`wovyr.platform.secrets`): shorter ones would mask ordinary words, and their encoded
forms are too short to hunt. A form shorter than `MIN_SCRUBBED` is never hunted.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote, quote_plus

__all__ = ["MASK", "MIN_SCRUBBED", "MIN_SECRET_CHARS", "mask", "scrub", "secret_forms"]

MASK = "***"
MIN_SCRUBBED = 4  # shorter values are not hunted in text (they would mask ordinary words)
MIN_SECRET_CHARS = 8  # the shortest value a secret may have (every form of it is hunted)
# What the WHATWG URL standard (and httpx) leaves unencoded in a path and in a query.
_PRINTABLE = {chr(i) for i in range(0x20, 0x7F)}
_QUERY_SAFE = "".join(sorted(_PRINTABLE - set(' "#<>')))
_PATH_SAFE = "".join(sorted(_PRINTABLE - set(' "#<>?`{}')))
_SHOWN = re.compile(
    r"(?:(?:Bearer|Basic|Token|Bot)\s+)?\$\{\{\s*secrets\.[A-Za-z_][A-Za-z0-9_]*\s*\}\}"
)


def mask(value: Any) -> Any:
    if isinstance(value, str) and _SHOWN.fullmatch(value):
        return value
    return MASK


def secret_forms(values: Iterable[str]) -> list[str]:
    """Every form of `values` that `scrub` replaces (see the module's docstring), longest
    first."""
    forms: set[str] = set()
    for value in values:
        if len(value) < MIN_SCRUBBED:
            continue
        raw = value.encode("utf-8")
        forms.update(
            {
                value,
                json.dumps(value)[1:-1],
                json.dumps(value, ensure_ascii=False)[1:-1],
                quote(value, safe=""),
                quote_plus(value, safe=""),
                quote(value),  # urllib's path: `/` kept
                quote(value, safe=_PATH_SAFE),
                quote(value, safe=_QUERY_SAFE),
                raw.hex(),
                raw.hex().upper(),
                *_base64_forms(raw),
            }
        )
    return sorted((f for f in forms if len(f) >= MIN_SCRUBBED), key=len, reverse=True)


def _base64_forms(raw: bytes) -> set[str]:
    """The characters of `raw`'s base64 (standard and URL-safe) that depend on `raw` alone,
    at each of the three offsets it may start at inside a longer encoded text."""
    forms: set[str] = set()
    for offset in range(3):
        encoded = base64.b64encode(bytes(offset) + raw).decode().rstrip("=")
        # the leading characters that mix in the bytes before, the last one those after
        lead = (0, 2, 3)[offset]
        tail = 0 if (offset + len(raw)) % 3 == 0 else 1
        core = encoded[lead : len(encoded) - tail]
        if offset == 0:
            forms.add(encoded)  # the value alone, ending as it ends
        forms.add(core)
    return forms | {f.replace("+", "-").replace("/", "_") for f in forms}


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
