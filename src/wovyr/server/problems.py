"""Errors as RFC 9457 problem documents (`application/problem+json`).

Every error response of the API has the same shape: ``type``, ``title``, ``status``,
``detail`` and, for invalid documents and requests, ``problems``: a list of
``{file, line, column, path, message, hint}``. A missing object and another tenant's object
get one and the same 404 body. Unexpected exceptions are logged and answered with a bare
500: no stack trace, no message, nothing from the inside leaves the server.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from wovyr.errors import (
    ActivityNotRegistered,
    ConfigError,
    Conflict,
    DefinitionDrift,
    DefinitionError,
    ExpressionError,
    InputError,
    KmsError,
    NotFound,
    Problem,
    QuotaExceeded,
    StoreError,
    StoreUnavailable,
    WovyrError,
)

__all__ = [
    "LOCATED_SCHEMA",
    "LOCATION_HEADER",
    "PROBLEM_JSON",
    "PROBLEM_SCHEMA",
    "TITLES",
    "ApiProblem",
    "install_problem_handlers",
    "located",
    "problem_responses",
]

PROBLEM_JSON = "application/problem+json"
log = logging.getLogger("wovyr.server")

TITLES = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    412: "Precondition Failed",
    413: "Content Too Large",
    415: "Unsupported Media Type",
    422: "Unprocessable Content",
    428: "Precondition Required",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
}
_SLUGS = {
    400: "bad-request",
    401: "unauthorized",
    403: "forbidden",
    404: "not-found",
    405: "method-not-allowed",
    409: "conflict",
    412: "precondition-failed",
    413: "content-too-large",
    415: "unsupported-media-type",
    422: "invalid",
    428: "precondition-required",
    429: "too-many-requests",
    500: "internal",
    503: "unavailable",
}
NOT_FOUND_DETAIL = "The requested resource does not exist."
LOCATED_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "One problem of a document or request, where it is.",
    "properties": {
        k: {"type": t}
        for k, t in (
            ("file", "string"),
            ("line", ["integer", "null"]),
            ("column", ["integer", "null"]),
            ("path", "string"),
            ("message", "string"),
            ("hint", ["string", "null"]),
        )
    },
}
PROBLEM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "An RFC 9457 problem document (`application/problem+json`).",
    "required": ["type", "title", "status", "detail"],
    "properties": {
        "type": {"type": "string", "description": "`urn:wovyr:problem:<slug>`"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
        "problems": {"type": "array", "items": {"$ref": "#/components/schemas/LocatedProblem"}},
    },
    "examples": [
        {
            "type": "urn:wovyr:problem:not-found",
            "title": "Not Found",
            "status": 404,
            "detail": "The requested resource does not exist.",
        }
    ],
}


LOCATION_HEADER: dict[str, Any] = {
    "Location": {"description": "The URL of the object created.", "schema": {"type": "string"}}
}


def located(response: Response, created: bool, location: str) -> None:
    """A write's status, 201 when it made the object now and 200 when the object was there
    already, and the object's `Location` either way."""
    response.status_code = 201 if created else 200
    response.headers["Location"] = location


def problem_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` for error codes, each an `application/problem+json` document
    (`wovyr.server.api.openapi` makes them references to one shared response each)."""
    schema = {"$ref": "#/components/schemas/Problem"}
    return {
        code: {"description": TITLES[code], "content": {PROBLEM_JSON: {"schema": schema}}}
        for code in codes
    }


class ApiProblem(WovyrError):
    """Raise from a handler to answer with a problem document."""

    def __init__(
        self,
        status: int,
        detail: str,
        *,
        problems: Sequence[Problem] = (),
        headers: dict[str, str] | None = None,
        slug: str | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.problems = list(problems)
        self.headers = headers or {}
        self.slug = slug

    def response(self) -> Response:
        """The problem document (`application/problem+json`) that answers with it."""
        body: dict[str, Any] = {
            "type": f"urn:wovyr:problem:{self.slug or _SLUGS.get(self.status, 'error')}",
            "title": TITLES.get(self.status, "Error"),
            "status": self.status,
            "detail": self.detail,
        }
        if self.problems:
            body["problems"] = [p.to_dict() for p in self.problems]
        return Response(
            json.dumps(body, ensure_ascii=False, default=str),
            status_code=self.status,
            media_type=PROBLEM_JSON,
            headers=self.headers,
        )


def not_found() -> Response:
    """THE 404: identical for a missing object and for another tenant's."""
    return ApiProblem(404, NOT_FOUND_DETAIL).response()


def _wovyr_error(exc: WovyrError) -> Response:
    if isinstance(exc, NotFound):
        return not_found()
    if isinstance(exc, DefinitionError | InputError):
        return ApiProblem(422, exc.message, problems=exc.problems).response()
    if isinstance(exc, ExpressionError | ActivityNotRegistered):
        return ApiProblem(422, str(exc)).response()
    if isinstance(exc, DefinitionDrift):
        return ApiProblem(409, str(exc), slug="definition-drift").response()
    if isinstance(exc, Conflict):
        return ApiProblem(409, str(exc)).response()
    if isinstance(exc, QuotaExceeded):
        wait = str(max(1, math.ceil(exc.retry_after)))
        return ApiProblem(429, str(exc), headers={"Retry-After": wait}).response()
    if isinstance(exc, StoreUnavailable):
        log.warning("store unavailable: %s", exc)
        return ApiProblem(503, "The store is unavailable; try again.", headers=_RETRY).response()
    if isinstance(exc, KmsError):  # its message names keys and objects, never a value
        log.error("key management failed: %s", exc)
        return ApiProblem(500, f"The server's key management failed: {exc.message}").response()
    if isinstance(exc, StoreError | ConfigError):
        log.error("request failed: %s", exc)
        return ApiProblem(500, "The server failed to handle the request.").response()
    return ApiProblem(422, str(exc)).response()


_RETRY = {"Retry-After": "1"}


def _validation_problems(exc: RequestValidationError) -> list[Problem]:
    out = []
    for err in exc.errors()[:50]:
        loc = [str(part) for part in err.get("loc", ())]
        where = loc[0] if loc else ""
        path = ".".join(loc[1:]) if where in ("body", "query", "path", "header") else ".".join(loc)
        out.append(
            Problem(str(err.get("msg", "invalid")), path=f"{where}:{path}" if path else where)
        )
    return out


def install_problem_handlers(app: FastAPI) -> None:
    async def on_api_problem(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ApiProblem)
        return exc.response()

    async def on_wovyr(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, WovyrError)
        return _wovyr_error(exc)

    async def on_http(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        if exc.status_code == 404:
            return not_found()
        detail = exc.detail if isinstance(exc.detail, str) else TITLES.get(exc.status_code, "")
        headers = dict(exc.headers or {})
        return ApiProblem(exc.status_code, detail, headers=headers).response()

    async def on_invalid(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        if any(e.get("type") == "json_invalid" for e in exc.errors()):
            return ApiProblem(400, "The request body is not valid JSON.").response()
        return ApiProblem(
            422, "The request is invalid.", problems=_validation_problems(exc)
        ).response()

    app.add_exception_handler(ApiProblem, on_api_problem)
    app.add_exception_handler(WovyrError, on_wovyr)
    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(RequestValidationError, on_invalid)
