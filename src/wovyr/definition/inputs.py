"""Workflow inputs: check what a caller gives against the declared inputs.

Rules: an `integer` is a Python int that is not a bool; a `number` is an int or float that is
not a bool (and finite); `object` is a mapping with string keys, `array` a list. Every declared
input appears in the result: given, else its default, else null, so `inputs.x == null` works
in expressions instead of failing on a missing key (a given null counts as not given). Enums
compare by JSON value and type, so `true` does not match an enum entry `1`. A `number` comes
out as a float (2 becomes 2.0) so that expression arithmetic does not depend on how the caller
wrote it (CEL never mixes int and double in arithmetic); an `integer` stays an int.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Mapping
from typing import Any

from wovyr.definition.locate import suggest
from wovyr.definition.model import InputType, Workflow
from wovyr.errors import InputError, Problem

__all__ = [
    "inputs_json_schema",
    "json_equal",
    "parse_cli_inputs",
    "resolve_inputs",
    "type_matches",
    "type_name",
]


def inputs_json_schema(workflow: Workflow) -> dict[str, Any]:
    """The JSON Schema of `workflow`'s inputs (what a model is offered when the workflow
    is an agent's tool): each input's type, enum, default and description; the required
    ones (without a default) listed; no other keys."""
    properties: dict[str, Any] = {}
    required = []
    for name, spec in workflow.inputs.items():
        prop: dict[str, Any] = {"type": spec.type}
        if spec.description:
            prop["description"] = spec.description
        if spec.enum is not None:
            prop["enum"] = list(spec.enum)
        if spec.default is not None:
            prop["default"] = spec.default
        elif spec.required:
            required.append(name)
        properties[name] = prop
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        schema["required"] = required
    return schema


def type_matches(value: Any, declared: InputType | str) -> bool:
    """Whether `value` (a JSON value) is of the declared input type."""
    if declared == "string":
        return isinstance(value, str)
    if declared == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if declared == "number":
        return (
            isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        )
    if declared == "boolean":
        return isinstance(value, bool)
    if declared == "object":
        return isinstance(value, Mapping) and all(isinstance(k, str) for k in value)
    if declared == "array":
        return isinstance(value, list)
    return False


def type_name(value: Any) -> str:
    """The JSON type of `value` in the words the input types use."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list):
        return "array"
    return type(value).__name__


def json_equal(left: Any, right: Any) -> bool:
    """Equality that keeps JSON types apart: True != 1, but 1 == 1.0."""
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left == right
    if isinstance(left, Mapping) and isinstance(right, Mapping):
        return left.keys() == right.keys() and all(json_equal(left[k], right[k]) for k in left)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(map(json_equal, left, right))
    if isinstance(left, int | float) and isinstance(right, int | float):
        return left == right
    if isinstance(left, str) and isinstance(right, str):
        return left == right
    return left is None and right is None


def resolve_inputs(workflow: Workflow, given: Mapping[str, Any] | None) -> dict[str, Any]:
    """The inputs an execution starts with; InputError listing every problem."""
    given = dict(given or {})
    problems: list[Problem] = []
    for name in given:
        if name not in workflow.inputs:
            hint = suggest(name, workflow.inputs)
            declared = ", ".join(sorted(workflow.inputs)) or "none"
            problems.append(
                Problem(
                    f"unknown input {name!r}",
                    path=f"inputs.{name}",
                    hint=hint or f"declared inputs: {declared}",
                )
            )
    resolved: dict[str, Any] = {}
    for name, spec in workflow.inputs.items():
        value = given.get(name)
        if value is None:
            if spec.required:
                problems.append(Problem(f"input {name!r} is required", path=f"inputs.{name}"))
            resolved[name] = _coerce(copy.deepcopy(spec.default), spec.type)
            continue
        problems.extend(_check_value(name, value, spec.type, spec.enum))
        resolved[name] = _coerce(value, spec.type)
    if problems:
        raise InputError(problems)
    return resolved


def _coerce(value: Any, declared: str) -> Any:
    """A `number` is always a float: CEL does no int/double arithmetic, so `inputs.x * 1.5`
    must not depend on whether the caller wrote 2 or 2.0."""
    if declared == "number" and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def _check_value(name: str, value: Any, declared: str, enum: list[Any] | None) -> list[Problem]:
    path = f"inputs.{name}"
    if not type_matches(value, declared):
        return [Problem(f"input {name!r} must be {declared}, not {type_name(value)}", path=path)]
    if enum is not None and not any(json_equal(value, option) for option in enum):
        allowed = ", ".join(json.dumps(option) for option in enum)
        return [Problem(f"input {name!r} must be one of {allowed}", path=path)]
    return []


def parse_cli_inputs(pairs: list[str]) -> dict[str, Any]:
    """Inputs from `-i key=value` flags.

    The value is read as JSON when it is valid JSON (`n=3` is the number 3, `ok=true` a
    boolean, `tags=["a","b"]` a list, `name="007"` the string "007"); otherwise it is kept as
    the literal string (`name=world`, `id=007`). NaN and Infinity stay strings. Splits at the
    first `=`; a repeated key is an error.
    """
    result: dict[str, Any] = {}
    problems: list[Problem] = []
    for pair in pairs:
        key, sep, text = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            problems.append(Problem(f"expected KEY=VALUE, got {pair!r}", path="inputs"))
            continue
        if key in result:
            problems.append(Problem(f"input {key!r} is given twice", path=f"inputs.{key}"))
            continue
        result[key] = _json_or_text(text)
    if problems:
        raise InputError(problems)
    return result


def _reject_constant(name: str) -> Any:
    raise ValueError(name)


def _json_or_text(text: str) -> Any:
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except ValueError:
        return text
