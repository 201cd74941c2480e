"""The JSON Schema: draft-07, committed copy up to date, examples valid, wrong documents not."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from wovyr.definition import json_schema, parse_document, schema_text
from wovyr.definition.schema import DRAFT_07, SCHEMA_FILE

from .conftest import EXAMPLES, REPO

VALIDATOR = jsonschema.Draft7Validator(json_schema())


def test_the_committed_schema_is_up_to_date() -> None:
    committed = (REPO / SCHEMA_FILE).read_text(encoding="utf-8")
    assert committed == schema_text(), "run: wovyr schema -o schema/wovyr-workflow.schema.json"


def test_the_schema_is_valid_draft_07() -> None:
    schema = json_schema()
    assert schema["$schema"] == DRAFT_07
    jsonschema.Draft7Validator.check_schema(schema)
    text = json.dumps(schema)
    assert "$defs" not in text
    assert schema["additionalProperties"] is False
    assert schema["definitions"]["Activity"]["additionalProperties"] is False
    assert schema["title"] and schema["description"]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_validates_against_the_schema(path: Path) -> None:
    data, _ = parse_document(path.read_bytes())
    assert list(VALIDATOR.iter_errors(data)) == []


BASE: dict[str, Any] = {
    "apiVersion": "wovyr/v1",
    "kind": "Workflow",
    "metadata": {"name": "t"},
    "activities": [{"id": "a", "set": {}}],
}


def _with(**changes: Any) -> dict[str, Any]:
    return {**BASE, **changes}


WRONG: dict[str, dict[str, Any]] = {
    "unknown top-level field": _with(extra=1),
    "wrong apiVersion": _with(apiVersion="wovyr/v2"),
    "missing metadata": {k: v for k, v in BASE.items() if k != "metadata"},
    "no activities": _with(activities=[]),
    "typo in an activity": _with(activities=[{"id": "a", "set": {}, "timout": "5s"}]),
    "two kinds": _with(activities=[{"id": "a", "set": {}, "tool": "x"}]),
    "no kind": _with(activities=[{"id": "a"}]),
    "bad id": _with(activities=[{"id": "a-b", "set": {}}]),
    "bad duration": _with(activities=[{"id": "a", "set": {}, "timeout": "5 minutes"}]),
    "bad retry": _with(activities=[{"id": "a", "set": {}, "retry": {"max_attempts": 0}}]),
    "two waits": _with(activities=[{"id": "a", "wait": {"signal": "s", "timer": {"after": 1}}}]),
    "timer with both": _with(
        activities=[{"id": "a", "wait": {"timer": {"after": 1, "at": "2027-01-01T00:00:00Z"}}}]
    ),
    "bad input type": _with(inputs={"x": {"type": "str"}}),
    "shell without argv": _with(activities=[{"id": "a", "shell": {}}]),
    "compensate with two kinds": _with(
        activities=[{"id": "a", "tool": "t", "compensate": {"tool": "u", "set": {}}}]
    ),
    "when is a number": _with(activities=[{"id": "a", "set": {}, "when": 1}]),
}


@pytest.mark.parametrize("case", list(WRONG))
def test_wrong_documents_do_not_validate(case: str) -> None:
    assert list(VALIDATOR.iter_errors(WRONG[case])), case


def test_the_base_document_is_valid() -> None:
    assert list(VALIDATOR.iter_errors(BASE)) == []
