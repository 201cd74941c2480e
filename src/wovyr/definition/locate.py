"""Pydantic validation errors as located, readable problems ("did you mean 'timeout'?").

Pydantic reports a path (`loc`) through the data it was given. We walk that path through the
parsed data to find the node (and so its line and column in the SourceMap); steps that are not
in the data are pydantic's own (the member of a union it tried, a missing field's name).
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

from wovyr.definition.model import Activity, CompensateSpec, Workflow
from wovyr.definition.source import DataPath, SourceMap
from wovyr.errors import DefinitionError, Problem

__all__ = ["field_names", "model_at", "model_problems", "suggest", "validated"]

_M = typing.TypeVar("_M", bound=BaseModel)


def validated(model: type[_M], data: Any, smap: SourceMap) -> _M:
    """`data` as a `model` (a document's), or DefinitionError with every problem located
    and in the order of the text."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = model_problems(exc, data, smap)
        problems.sort(key=lambda p: (p.line or 0, p.column or 0))
        raise DefinitionError(problems) from None


def model_problems(exc: ValidationError, data: Any, smap: SourceMap) -> list[Problem]:
    """One problem per location: errors from the branches of one union are merged."""
    grouped: dict[tuple[DataPath, str], list[str]] = {}
    order: list[tuple[DataPath, str]] = []
    single: list[Problem] = []
    for err in exc.errors(include_url=False):
        path, rest = _resolve(err["loc"], data)
        if err["type"] == "extra_forbidden":
            single.append(_unknown_field(path, smap))
        elif rest == ["[key]"]:  # a mapping's key refused: located at that key
            single.append(smap.problem(_message(err), path, key=True))
        elif err["type"] == "missing":
            name = str(rest[-1]) if rest else "?"
            single.append(smap.problem(f"missing required field {name!r}", path))
        elif rest:  # pydantic tried several types here (a union); say them all once
            slot = (path, "union")
            if slot not in grouped:
                grouped[slot] = []
                order.append(slot)
            grouped[slot].append(_expected(err))
        else:
            single.append(smap.problem(_message(err), path))
    for slot in order:
        options = list(dict.fromkeys(grouped[slot]))
        if all(option.startswith("expected ") for option in options):
            options = [options[0]] + [o.removeprefix("expected ") for o in options[1:]]
        single.append(smap.problem(" or ".join(options), slot[0]))
    return single


def _resolve(loc: tuple[int | str, ...], data: Any) -> tuple[DataPath, list[int | str]]:
    """The part of `loc` that exists in `data`, and the rest."""
    path: list[str | int] = []
    current = data
    for index, step in enumerate(loc):
        if not _has(current, step):
            if index + 1 < len(loc) and _has(current, loc[index + 1]):
                continue  # the tag of the union member pydantic chose (a discriminator's)
            return tuple(path), list(loc[index:])
        current = current[step]
        path.append(step)
    return tuple(path), []


def _has(container: Any, step: int | str) -> bool:
    if isinstance(container, dict):
        return isinstance(step, str) and step in container
    if isinstance(container, list):
        return isinstance(step, int) and 0 <= step < len(container)
    return False


def _unknown_field(path: DataPath, smap: SourceMap) -> Problem:
    name = str(path[-1]) if path else "?"
    model = model_at(path[:-1])
    names = field_names(model) if model else []
    hint = suggest(name, names)
    if hint is None and names:
        hint = "allowed fields: " + ", ".join(sorted(names))
    return smap.problem(f"unknown field {name!r}", path, key=True, hint=hint)


def suggest(name: str, choices: Iterable[str]) -> str | None:
    """ "did you mean 'x'?" for the closest of `choices`, if any is close."""
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}?" if close else None


def field_names(model: type[BaseModel]) -> list[str]:
    """The names a document uses for `model`'s fields (aliases where set)."""
    return list(_document_fields(model))


def _document_fields(model: type[BaseModel]) -> dict[str, FieldInfo]:
    """`model`'s fields by the key a document uses (an activity's include its kinds' keys)."""
    if issubclass(model, Activity | CompensateSpec):
        return model.document_fields()
    return {info.alias or name: info for name, info in model.model_fields.items()}


def model_at(path: DataPath) -> type[BaseModel] | None:
    """The model class that validates the mapping at `path` in a workflow document."""
    annotation: Any = Workflow
    for step in path:
        annotation = _unwrap(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            fields = _document_fields(annotation)
            if step not in fields:
                return None
            annotation = fields[str(step)].annotation
        elif typing.get_origin(annotation) in (list, dict):
            annotation = typing.get_args(annotation)[-1]
        else:
            return None
    annotation = _unwrap(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def _unwrap(annotation: Any) -> Any:
    """`X` from `X | None`."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        return members[0] if len(members) == 1 else annotation
    return annotation


_REWRITES = (
    (re.compile(r"^Value error, "), ""),
    (re.compile(r"^Input should be "), "expected "),
    (re.compile(r"a valid dictionary or instance of \w+"), "a mapping"),
    (re.compile(r"a valid dictionary"), "a mapping"),
    (re.compile(r"^String should match pattern '(.*)'$"), r"does not match the pattern \1"),
    (re.compile(r"^String should"), "should"),
    (re.compile(r"^List should"), "the list should"),
)


def _expected(err: ErrorDetails) -> str:
    text = err["msg"]
    for pattern, replacement in _REWRITES:
        text = pattern.sub(replacement, text)
    return text.split(",", 1)[0] if text.startswith("expected a valid") else text


def _message(err: ErrorDetails) -> str:
    text = _expected(err)
    value = err.get("input")
    if err["type"] != "value_error" and isinstance(value, str | int | float | bool):
        shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
        text += f", got {shown}"
    elif err["type"] != "value_error" and value is None:
        text += ", got null"
    return text
