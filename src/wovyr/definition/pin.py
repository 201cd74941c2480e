"""Content hashes of definitions, so an execution always resumes on the definition it began.

The canonical form is the *model* dumped to JSON, not the source text: documents that differ
only in key order, whitespace, comments, quoting, YAML vs JSON, or how a duration is spelled
(`90s`, `1m30s`, `PT90S`, `90`) hash the same. Values equal to the model's defaults are left
out (`exclude_defaults`), so writing a default explicitly and omitting it hash the same, and
adding a new field with a default to the model later does not change existing hashes. Keys
are sorted and there is no whitespace; non-ASCII text is kept as UTF-8.
"""

from __future__ import annotations

import hashlib
import json

from wovyr.definition.model import Workflow

__all__ = ["canonical_json", "content_hash"]


def canonical_json(workflow: Workflow) -> str:
    """The canonical JSON text of `workflow` (see the module docstring)."""
    data = workflow.model_dump(by_alias=True, mode="json", exclude_defaults=True)
    return json.dumps(
        data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def content_hash(workflow: Workflow) -> str:
    """`sha256:<hex>` of the canonical JSON."""
    digest = hashlib.sha256(canonical_json(workflow).encode("utf-8")).hexdigest()
    return f"sha256:{digest}"
