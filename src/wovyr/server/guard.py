"""The outermost ASGI layer (request body cap, crash guard, request metrics, and
`Cache-Control: no-store` and `X-Content-Type-Options: nosniff` on every response: they
carry tenant data), and strict JSON for request bodies (`StrictJsonRoute`, which also
refuses nesting deeper than the stores keep).

The body cap is checked twice: a declared `Content-Length` over the cap is refused before
the application runs, and the bytes actually received are counted as they stream in (a
chunked body has no length to trust). Any exception that escapes the application is
logged here and answered with a bare 500 problem, so no stack trace ever reaches a client.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from wovyr.platform.metrics import Metrics
from wovyr.server.problems import ApiProblem, problem_responses
from wovyr.store.codec import MAX_DEPTH

__all__ = [
    "CALLER_TENANT",
    "BodyTooLarge",
    "RequestGuard",
    "StrictJsonRoute",
    "api_router",
    "strict_json",
]

log = logging.getLogger("wovyr.server")
# What every response carries unless it says otherwise: they hold tenant data (never cached),
# and a browser must take their Content-Type as given (a JSON body that holds a tenant's
# text is never sniffed into HTML or script).
_EVERY_RESPONSE = ((b"cache-control", b"no-store"), (b"x-content-type-options", b"nosniff"))
# The key in the request's state where authentication leaves the caller's tenant, so the
# request is counted for that tenant (and shown only to it).
CALLER_TENANT = "wovyr_tenant"


class BodyTooLarge(HTTPException):
    def __init__(self, limit: int) -> None:
        super().__init__(413, f"The request body is larger than {limit} bytes.")


class RequestGuard:
    """`large_bodies`: the routes that take a larger body than `max_body_bytes` (a `POST`
    to the path, its own cap: an artifact's bytes)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_body_bytes: int,
        metrics: Metrics,
        large_bodies: Mapping[str, int] | None = None,
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.metrics = metrics
        self.large_bodies = dict(large_bodies or {})

    def _cap(self, scope: Scope) -> int:
        if scope.get("method") == "POST":
            return self.large_bodies.get(scope.get("path", ""), self.max_body_bytes)
        return self.max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        cap = self._cap(scope)
        state: dict[str, Any] = {"status": 500, "sent": False, "received": 0}

        async def tracking_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                state["status"] = int(message["status"])
                state["sent"] = True
                headers = list(message.get("headers", ()))
                names = {name.lower() for name, _ in headers}
                added = [(k, v) for k, v in _EVERY_RESPONSE if k not in names]
                if added:
                    message = {**message, "headers": headers + added}
            await send(message)

        async def counting_receive() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                state["received"] += len(message.get("body", b""))
                if state["received"] > cap:
                    raise BodyTooLarge(cap)
            return message

        try:
            if _has_nul(scope):  # no store can keep one in text, so refuse it at the door
                await ApiProblem(400, _NUL).response()(scope, receive, tracking_send)
            elif self._declared_too_large(scope, cap):
                await self._refuse(413, scope, receive, tracking_send, cap)
            else:
                await self.app(scope, counting_receive, tracking_send)
        except BodyTooLarge:
            if not state["sent"]:
                await self._refuse(413, scope, receive, tracking_send, cap)
        except Exception:
            log.exception("unhandled error on %s %s", scope.get("method"), scope.get("path"))
            if not state["sent"]:
                await self._refuse(500, scope, receive, tracking_send)
        finally:
            self.metrics.observe_request(
                scope.get("method", ""),
                _route_template(scope),
                state["status"],
                time.perf_counter() - started,
                tenant=str(scope.get("state", {}).get(CALLER_TENANT, "")),
            )

    def _declared_too_large(self, scope: Scope, cap: int) -> bool:
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    return int(value) > cap
                except ValueError:
                    return False
        return False

    async def _refuse(
        self, status: int, scope: Scope, receive: Receive, send: Send, cap: int = 0
    ) -> None:
        detail = (
            f"The request body is larger than {cap} bytes."
            if status == 413
            else "The server failed to handle the request."
        )
        headers = {"Connection": "close"} if status == 413 else None
        response = ApiProblem(status, detail, headers=headers).response()
        await response(scope, receive, send)


def _has_nul(scope: Scope) -> bool:
    query: bytes = scope.get("query_string", b"")
    return "\x00" in scope.get("path", "") or b"%00" in query or b"\x00" in query


def _route_template(scope: Scope) -> str:
    """The matched route's template (`/api/v1/workflows/{execution_id}`), never the raw
    path: ids in metric labels would make one time series per execution."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else "unmatched"


_NUL = "NUL characters (U+0000) are not accepted in requests."


class BadJson(HTTPException):
    def __init__(self, detail: str, status: int = 400) -> None:
        super().__init__(status, detail)


_TOO_DEEP = f"The request body is nested more than {MAX_DEPTH} levels deep."


def _no_constants(name: str) -> Any:
    raise BadJson(f"The request body is not valid JSON: {name} is not a JSON number.")


def strict_json(body: bytes) -> Any:
    """RFC 8259 JSON only: no NaN/Infinity (Python's parser takes them; PostgreSQL does
    not), no unpaired surrogates (they cannot be stored as UTF-8) and no NUL characters
    (PostgreSQL text cannot hold them) in strings; nesting deeper than `MAX_DEPTH` is a 422
    (the stores refuse it), whatever the parser could have read."""
    try:
        value = json.loads(body, parse_constant=_no_constants)
    except RecursionError:
        raise BadJson(_TOO_DEEP, 422) from None
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:  # iterative: any depth is measured without recursion
        item, depth = stack.pop()
        if isinstance(item, dict | list) and depth >= MAX_DEPTH + 1:
            raise BadJson(_TOO_DEEP, 422)
        if isinstance(item, dict):
            stack.extend((k, depth + 1) for k in item)
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
        elif isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise BadJson("The request body holds invalid Unicode.") from None
            if "\x00" in item:
                raise BadJson(_NUL)
        elif isinstance(item, float) and not math.isfinite(item):  # e.g. 1e999
            raise BadJson("The request body holds a number out of range.")
    return value


_INLINE_JSON = 4096  # bytes of a body parsed and checked on the event loop (well under 1 ms)


class _StrictJsonRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            body = await self.body()
            if len(body) <= _INLINE_JSON:  # cheaper than the hop to a thread and back
                self._json = strict_json(body)
            else:  # off the event loop: checking a 1 MiB body walks every value (a second)
                self._json = await run_in_threadpool(strict_json, body)
        return self._json


class StrictJsonRoute(APIRoute):
    """A route whose JSON body is parsed by `strict_json`."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def strict(request: Request) -> Response:
            return await handler(_StrictJsonRequest(request.scope, request.receive))

        return strict


def api_router(prefix: str, tag: str, *statuses: int, strict: bool = True) -> APIRouter:
    """The router of one group of `/api/v1` operations: under `prefix`, tagged `tag`, every
    operation documenting the problems of `statuses`; JSON bodies parsed by `strict_json`
    (`strict=False`: a group that takes YAML bodies too, and reads them itself)."""
    return APIRouter(
        prefix=prefix,
        tags=[tag],
        responses=problem_responses(*statuses),
        route_class=StrictJsonRoute if strict else APIRoute,
    )
