"""The `http` kind: one HTTP request (see `wovyr.activities.http` for how it is sent)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from wovyr.activities.kinds import ActivityKind, Dispatch, register_kind
from wovyr.fields import FrozenModel

__all__ = ["KIND", "HttpSpec", "HttpStep"]


class HttpSpec(FrozenModel):
    url: str
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"] = "GET"
    headers: dict[str, str] = Field(default_factory=dict)
    query: dict[str, Any] = Field(default_factory=dict)
    json_body: Any = Field(default=None, alias="json")
    body: str | None = None
    allowed_statuses: list[int] = Field(
        default_factory=list, description="Statuses that count as success (default: 2xx)"
    )
    max_response_bytes: int = Field(default=1_048_576, ge=1, le=64 * 1_048_576)
    follow_redirects: bool = Field(
        default=False, description="Follow 3xx redirects (off: a redirect is a response)"
    )


class HttpStep(FrozenModel):
    http: HttpSpec


async def _execute(step: HttpStep, rendered: Any, dispatch: Dispatch) -> Any:
    from wovyr.activities.http import run_http  # httpx only where a request is sent

    return await run_http(
        HttpSpec.model_validate(rendered),
        timeout=dispatch.timeout,
        idempotency_key=dispatch.context.idempotency_key,
    )


KIND = register_kind(
    ActivityKind(
        name="http",
        model=HttpStep,
        spec=lambda step: step.http.model_dump(by_alias=True, mode="json", exclude_none=True),
        execute=_execute,
        description="one HTTP request",
    )
)
