"""What the platform's records share: the check of a name (a secret's, a provider's, an
MCP server's) and how a record is shown (`to_dict`)."""

from __future__ import annotations

import dataclasses
import re
from datetime import datetime
from typing import Any

from wovyr.errors import InputError, Problem

__all__ = ["checked_name", "shown_fields"]


def checked_name(name: Any, pattern: re.Pattern[str], path: str, rule: str, hint: str) -> str:
    """`name` if `pattern` matches it, else `InputError` at `path` saying `rule`, with an
    example in `hint`."""
    if not isinstance(name, str) or not pattern.match(name):
        raise InputError([Problem(rule, path=path, hint=hint)])
    return name


def shown_fields(record: Any) -> dict[str, Any]:
    """A dataclass's fields in order, as JSON shows them: times in ISO 8601."""
    shown = {f.name: getattr(record, f.name) for f in dataclasses.fields(record)}
    return {k: v.isoformat() if isinstance(v, datetime) else v for k, v in shown.items()}
