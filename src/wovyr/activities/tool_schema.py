"""What a model is told about a registered tool, and how its call's arguments are checked.

A tool (a handler registered with `@wovyr.activity("name")`) is offered to a model as an
OpenAI function: its name mapped to `^[a-zA-Z0-9_-]{1,64}$` (a registered name may hold
dots), its docstring as the description, and the JSON Schema of its keyword parameters,
derived from the signature and type hints with pydantic (`ctx` left out: it is Wovyr's; a
parameter without a hint takes any JSON value; pydantic models as hints are expanded).

`ToolSignature.arguments(text)` checks the JSON text a model wrote against the same model:
invalid JSON, a missing or unknown argument, a value of the wrong type each raise
`InvalidToolArguments`, whose message is what the model is told.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import re
import typing
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from wovyr.activities.base import Handler, parameters_of
from wovyr.errors import WovyrError

__all__ = [
    "InvalidToolArguments",
    "ToolSignature",
    "call_arguments",
    "function_name",
    "tool_signature",
]

_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")


class InvalidToolArguments(WovyrError, ValueError):
    """The arguments a model wrote for a tool do not fit it."""


def call_arguments(text: Any) -> tuple[Any, dict[str, Any] | None]:
    """The arguments object a model wrote for a call (JSON text; empty: none), and None; or
    what it wrote and the error the call then ends with (`InvalidArguments`)."""
    try:
        arguments = json.loads(text) if isinstance(text, str) and text.strip() else {}
    except ValueError as exc:
        return text, {"type": "InvalidArguments", "message": f"not JSON: {exc}"}
    if not isinstance(arguments, dict):
        return arguments, {"type": "InvalidArguments", "message": "not a JSON object"}
    return arguments, None


def function_name(tool: str, taken: set[str]) -> str:
    """The name a model calls `tool` by: unsafe characters replaced, at most 64, unique
    among `taken` (the agent keeps the map back to the registered name)."""
    base = _UNSAFE.sub("_", tool)[:64] or "tool"
    name, n = base, 1
    while name in taken:
        n += 1
        suffix = f"_{n}"
        name = base[: 64 - len(suffix)] + suffix
    return name


@dataclass(frozen=True)
class ToolSignature:
    tool: str  # the registered name
    model: type[BaseModel]
    description: str

    def function(self, name: str) -> dict[str, Any]:
        """The OpenAI `tools` entry offering this tool as `name`."""
        schema = self.model.model_json_schema()
        schema.pop("title", None)
        return {
            "type": "function",
            "function": {"name": name, "description": self.description, "parameters": schema},
        }

    def arguments(self, text: str | None) -> dict[str, Any]:
        """The keyword arguments in a model's JSON text, checked against the signature."""
        try:
            raw = json.loads(text or "{}")
        except ValueError as exc:
            raise InvalidToolArguments(f"the arguments are not valid JSON: {exc}") from None
        if not isinstance(raw, dict):
            raise InvalidToolArguments("the arguments must be a JSON object")
        try:
            checked = self.model.model_validate(raw)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or '(arguments)'}: {e['msg']}"
                for e in exc.errors()[:5]
            )
            raise InvalidToolArguments(f"invalid arguments for {self.tool}: {problems}") from None
        return {name: getattr(checked, name) for name in self.model.model_fields if name in raw}


def tool_signature(tool: str, handler: Handler) -> ToolSignature:
    """The schema of `handler`'s keyword parameters (cached per handler)."""
    try:
        return _CACHE[(tool, handler)]
    except (KeyError, TypeError):
        pass
    found = _read(tool, handler)
    with contextlib.suppress(TypeError):  # an unhashable callable: not cached
        _CACHE[(tool, handler)] = found
    return found


_CACHE: dict[tuple[str, Any], ToolSignature] = {}


def _read(tool: str, handler: Handler) -> ToolSignature:
    params = parameters_of(handler)
    try:
        hints = typing.get_type_hints(handler)
    except Exception:  # unresolvable hints: every argument takes any JSON value
        hints = {}
    try:
        signature = inspect.signature(handler)
    except (TypeError, ValueError):
        signature = None
    fields: dict[str, Any] = {}
    for name in params.names:
        hint = hints.get(name, Any)
        default: Any = ...
        if signature is not None and name in signature.parameters:
            found = signature.parameters[name].default
            if found is not inspect.Parameter.empty:
                default = found
        fields[name] = (hint, default)
    extra: Literal["allow", "forbid"] = (
        "allow" if params.any_keyword or not params.readable else "forbid"
    )
    model = create_model(
        f"{_UNSAFE.sub('_', tool)}_arguments",
        __config__=ConfigDict(extra=extra, arbitrary_types_allowed=True),
        **fields,
    )
    doc = inspect.getdoc(handler) or f"The registered tool {tool}."
    return ToolSignature(tool, model, doc.strip()[:1024])
