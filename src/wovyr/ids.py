"""Identifiers: time-sortable execution ids (UUID version 7), derived child ids, and the one
alphabet every execution id obeys.

Every execution id, chosen by a caller or derived by the engine (a child's
`<parent>::<activity>[<index>]~<attempt>`, a schedule tick's `<schedule>-<time>Z`), is 1-200
characters of letters, digits and `. _ : - ~ [ ]`, starting with a letter or digit: no `/`,
whitespace or control character, so every id can be addressed in a URL path segment and a
log line. Ids are per tenant: the same id in two tenants names two executions.

A derived id that would be longer than 200 characters (deep nesting, long activity names)
is shortened deterministically by `derived_id`: its first 181 characters, `~h` and 17 hex
digits of the SHA-256 of the whole derived text; the same parent, activity, item and attempt
always give the same id, so a repeated child start stays idempotent.

A chain of runs made by continue-as-new keeps its first run's id as its logical id: run 1
is `<id>`, run n > 1 is `<id>~c<n>` (shortened like any derived id), so lists group a chain
by its prefix and the engine finds any run of it from the logical id. A caller may not
choose an id ending in `~c<digits>`: those are the chains'.
"""

from __future__ import annotations

import hashlib
import os
import re
import uuid
from datetime import datetime

__all__ = [
    "DEFAULT_TENANT",
    "ID_MAX_LENGTH",
    "ID_RULE",
    "TENANT_RULE",
    "child_id",
    "continued_id",
    "derived_id",
    "is_chain_run_id",
    "is_execution_id",
    "is_tenant",
    "new_id",
    "validate_execution_id",
]

DEFAULT_TENANT = "default"  # the local owner's tenant, and every key's when none is named
TENANT_RULE = "a tenant is 1-64 letters, digits, '.', '_' or '-'"
_TENANT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
ID_MAX_LENGTH = 200
_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:~\[\]\-]{0,199}")
_HASH_DIGITS = 17
_CHAIN_SUFFIX = re.compile(r"~c[0-9]+$")
ID_RULE = (
    f"execution ids are 1-{ID_MAX_LENGTH} characters of letters, digits, '.', '_', ':', '-', "
    "'~', '[' and ']', starting with a letter or digit"
)


def new_id(now: datetime) -> str:
    """A UUIDv7 string whose leading 48 bits are `now` in milliseconds, so ids sort by time."""
    ms = int(now.timestamp() * 1000) & ((1 << 48) - 1)
    rand = int.from_bytes(os.urandom(10), "big")
    value = (ms << 80) | (0x7 << 76) | ((rand >> 68) & 0xFFF) << 64
    value |= (0b10 << 62) | (rand & ((1 << 62) - 1))
    return str(uuid.UUID(int=value))


def is_execution_id(value: object) -> bool:
    """True when `value` is a string in the execution id alphabet and length."""
    return isinstance(value, str) and _ID_RE.fullmatch(value) is not None


def is_tenant(value: object) -> bool:
    """True when `value` is a tenant name (`TENANT_RULE`)."""
    return isinstance(value, str) and _TENANT_RE.match(value) is not None


def validate_execution_id(value: str) -> str:
    """Return `value` if it is an acceptable execution id, else raise ValueError."""
    if not is_execution_id(value):
        raise ValueError(ID_RULE)
    return value


def derived_id(text: str) -> str:
    """`text` as an execution id: unchanged when it fits, shortened (first characters, `~h`
    and a hash of the whole) when only its length is too much. Its characters must already
    be in the alphabet (the parts it is built from were validated), else ValueError."""
    if len(text) > ID_MAX_LENGTH:
        digest = hashlib.sha256(text.encode()).hexdigest()[:_HASH_DIGITS]
        text = f"{text[: ID_MAX_LENGTH - _HASH_DIGITS - 2]}~h{digest}"
    return validate_execution_id(text)


def child_id(
    parent: str, activity: str, index: int | None = None, attempt: int = 1, *, shorten: bool = True
) -> str:
    """The id of the child workflow started by attempt `attempt` of `activity` of `parent`
    (and item `index`): `<parent>::<activity>[<index>]~<attempt>` (no `~1` for a first
    attempt), shortened by `derived_id` when too long (`shorten=False`: the text as it is,
    which is how an engine before the length rule named such a child)."""
    base = f"{parent}::{activity}"
    if index is not None:
        base = f"{base}[{index}]"
    text = base if attempt == 1 else f"{base}~{attempt}"
    return derived_id(text) if shorten else text


def continued_id(root: str, run: int) -> str:
    """The id of run `run` (from 1) of the continue-as-new chain whose first run is `root`:
    `root` itself for run 1, else `<root>~c<run>` (shortened by `derived_id` when too long)."""
    return root if run <= 1 else derived_id(f"{root}~c{run}")


def is_chain_run_id(value: str) -> bool:
    """True for an id that ends as a chain's later runs do (`~c<digits>`): reserved, a
    caller may not choose one."""
    return _CHAIN_SUFFIX.search(value) is not None
