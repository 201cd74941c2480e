"""A document sent as a request body (a workflow definition, an agent): YAML, or a JSON
object re-encoded as YAML-compatible text so that its errors are located like a file's."""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request

from wovyr.errors import InputError, Problem
from wovyr.server.problems import LOCATION_HEADER, ApiProblem

__all__ = ["APPLIED", "DOCUMENT_BODY", "read_document"]

_YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml", "text/plain")

# The `responses` of a route that applies a document: 201 applied, 200 unchanged.
APPLIED: dict[int | str, dict[str, Any]] = {
    200: {"description": "Already applied with the same content."},
    201: {"headers": LOCATION_HEADER},
}
# The request body in the OpenAPI document of a route that takes one.
DOCUMENT_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "application/yaml": {"schema": {"type": "string"}},
            "application/json": {"schema": {"type": "object"}},
        },
    }
}


async def read_document(request: Request, what: str) -> str:
    """The body as document text; `what` ("workflow", "agent") names it in errors."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    raw = await request.body()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError([Problem("the document is not UTF-8 text", path="body")]) from None
    if kind == "application/json":
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, RecursionError):
            raise InputError([Problem("the body is not valid JSON", path="body")]) from None
        if not isinstance(data, dict):
            raise InputError([Problem(f"a JSON body is the {what} object", path="body")])
        return json.dumps(data, indent=2)  # parsed as a document: located errors
    if kind in _YAML_TYPES:
        return text
    raise ApiProblem(
        415,
        f"Send the {what} as YAML (application/yaml) or as a JSON object (application/json).",
    )
