"""The start form of a definition, generated from its `inputs`: one field per input, of its
type (text, a number, true/false, a choice of its `enum`, JSON for objects and arrays),
filled with its default, marked when required; and the way back, from the texts a browser
posts to the typed inputs a start takes, with each problem told at its field.

What a field can check alone (a number that is not one, JSON that does not parse) is told
here; everything else (a required input left empty, a value outside the enum) is the
engine's `InputError` at `inputs.NAME`, shown at the same field. An empty field is not
given: its default applies. No HTTP here (see `catalog_routes.py`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from wovyr.definition.model import InputSpec, Workflow
from wovyr.errors import InputError

__all__ = ["FIELD_PREFIX", "InputField", "field_errors", "parse_start_form", "start_fields"]

#: Inputs are posted as `in:NAME`, apart from the form's own fields (csrf_token, id).
FIELD_PREFIX = "in:"
_WHOLE = "integer"


@dataclass(frozen=True)
class InputField:
    """One input's control on the start form."""

    name: str
    type: str  # the input's type: string, number, integer, boolean, object, array
    control: str  # text, number, boolean, choice, json
    required: bool
    description: str | None
    value: str  # what the field holds: the default, or what was posted
    choices: tuple[tuple[str, str], ...] = ()  # (value posted, text shown) of a choice
    error: str | None = None

    @property
    def key(self) -> str:
        return FIELD_PREFIX + self.name

    @property
    def step(self) -> str:
        return "1" if self.type == _WHOLE else "any"


def _text(value: Any, declared: str) -> str:
    """A value as its field shows it."""
    if value is None:
        return ""
    if declared in ("object", "array"):
        return json.dumps(value, indent=2, ensure_ascii=False)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    return json.dumps(value)


def _control(spec: InputSpec) -> str:
    if spec.enum is not None:
        return "choice"
    return {
        "number": "number",
        "integer": "number",
        "boolean": "boolean",
        "object": "json",
        "array": "json",
    }.get(spec.type, "text")


def _choices(spec: InputSpec) -> tuple[tuple[str, str], ...]:
    if spec.enum is not None:
        options = [(_text(v, spec.type), _text(v, spec.type)) for v in spec.enum]
    elif spec.type == "boolean":
        options = [("true", "true"), ("false", "false")]
    else:
        return ()
    if not spec.required or spec.default is not None:
        default = _text(spec.default, spec.type)
        options.insert(0, ("", f"(not given: {default})" if default else "(not given)"))
    return tuple(options)


def start_fields(
    workflow: Workflow,
    posted: Mapping[str, str] | None = None,
    errors: Mapping[str, str] | None = None,
) -> list[InputField]:
    """The form's fields in declaration order: each holds what was `posted` (after a
    refused start) or the input's default, and its problem from `errors`."""
    fields = []
    for name, spec in workflow.inputs.items():
        key = FIELD_PREFIX + name
        value = posted[key] if posted is not None and key in posted else None
        if value is None:
            value = _text(spec.default, spec.type)
        fields.append(
            InputField(
                name=name,
                type=spec.type,
                control=_control(spec),
                required=spec.required and spec.default is None,
                description=spec.description,
                value=value,
                choices=_choices(spec),
                error=(errors or {}).get(name),
            )
        )
    return fields


def _parsed(text: str, spec: InputSpec) -> Any:
    """The typed value of a non-empty field; ValueError saying what it should be."""
    declared = spec.type
    if (spec.enum is not None and declared != "string") or declared in ("object", "array"):
        try:
            return json.loads(text)
        except ValueError:
            raise ValueError(f"not valid JSON ({'a choice' if spec.enum else declared})") from None
    if declared == "string":
        return text
    if declared == "boolean":
        if text not in ("true", "false"):
            raise ValueError("choose true or false")
        return text == "true"
    if declared == _WHOLE:
        try:
            return int(text.strip())
        except ValueError:
            raise ValueError("not a whole number") from None
    try:
        number = float(text.strip())
    except ValueError:
        raise ValueError("not a number") from None
    if not math.isfinite(number):
        raise ValueError("not a finite number")
    return number


def parse_start_form(
    workflow: Workflow, form: Mapping[str, str]
) -> tuple[dict[str, Any], dict[str, str]]:
    """The inputs the posted `form` gives (empty fields left out: their defaults apply)
    and the problems found field by field (name -> message)."""
    inputs: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for name, spec in workflow.inputs.items():
        text = form.get(FIELD_PREFIX + name, "")
        if text == "" or (text.strip() == "" and spec.type != "string"):
            continue
        try:
            inputs[name] = _parsed(text, spec)
        except ValueError as exc:
            errors[name] = str(exc)
    return inputs, errors


def field_errors(error: InputError, workflow: Workflow) -> tuple[dict[str, str], list[str]]:
    """The engine's problems with a start, each at its input's field when it names one
    (`inputs.NAME`), and the others (labels, the tenant's policy or quota) as texts."""
    by_field: dict[str, str] = {}
    others: list[str] = []
    for problem in error.problems:
        path = problem.path or ""
        name = path.removeprefix("inputs.").split(".", 1)[0] if path.startswith("inputs.") else ""
        text = problem.message + (f" ({problem.hint})" if problem.hint else "")
        if name in workflow.inputs and name not in by_field:
            by_field[name] = text
        else:
            others.append(text)
    return by_field, others
