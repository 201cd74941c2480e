"""The JSON Schema of workflow documents, in draft-07 form, generated from the model.

Draft-07 because it is the newest draft the YAML editor plugin most people use
(yaml-language-server) understands; a document opts in with the modeline
`# yaml-language-server: $schema=<path or URL>/wovyr-workflow.schema.json`.

Pydantic writes draft 2020-12: definitions under `$defs`. We move them to `definitions`,
rewrite the references, wrap a `$ref` that has sibling keywords in `allOf` (draft-07 ignores
siblings of `$ref`), and add the "exactly one of" rules that the model checks in code, so an
editor flags an activity with two kind keys too. The committed copy under `schema/` is kept
equal to `schema_text()` by a test.
"""

from __future__ import annotations

import json
from typing import Any

from wovyr.definition.model import Workflow, activity_kinds
from wovyr.kinds.table import DECLARED as KINDS

__all__ = ["SCHEMA_FILE", "json_schema", "schema_text"]

SCHEMA_FILE = "schema/wovyr-workflow.schema.json"
DRAFT_07 = "http://json-schema.org/draft-07/schema#"

_EXACTLY_ONE = {
    "WaitSpec": ("signal", "approval", "timer"),
    "TimerWait": ("after", "at"),
}


def json_schema() -> dict[str, Any]:
    """The draft-07 JSON Schema of a workflow document, with every registered kind's
    fragment (the schema of its model) merged into activities and compensations."""
    raw = Workflow.model_json_schema(by_alias=True, mode="validation")
    definitions = raw.pop("$defs", {})
    kinds = {"Activity": activity_kinds(), "CompensateSpec": activity_kinds(compensating=True)}
    for name, names in kinds.items():
        properties: dict[str, Any] = {}
        for kind in names:
            fragment = KINDS.get(kind).json_schema()
            definitions.update(fragment.pop("$defs", {}))
            properties.update(fragment.get("properties", {}))
        target = definitions[name]
        target["properties"] = {**properties, **target.get("properties", {})}
        target["oneOf"] = [{"required": [key]} for key in names]
    for name, keys in _EXACTLY_ONE.items():
        definitions[name]["oneOf"] = [{"required": [key]} for key in keys]
    schema: dict[str, Any] = {
        "$schema": DRAFT_07,
        "title": "Wovyr workflow",
        "description": "A Wovyr workflow definition (apiVersion wovyr/v1): a DAG of activities.",
        **{k: v for k, v in raw.items() if k != "title"},
        "definitions": definitions,
    }
    converted = _convert(schema)
    assert isinstance(converted, dict)
    return converted


def _convert(node: Any) -> Any:
    if isinstance(node, list):
        return [_convert(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _convert(value) for key, value in node.items()}
    ref = out.get("$ref")
    if isinstance(ref, str):
        out["$ref"] = ref.replace("#/$defs/", "#/definitions/")
        if len(out) > 1:
            siblings = {k: v for k, v in out.items() if k != "$ref"}
            return {**siblings, "allOf": [{"$ref": out["$ref"]}]}
    return out


def schema_text() -> str:
    """The schema as committed: two-space indented JSON with a final newline."""
    return json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"
