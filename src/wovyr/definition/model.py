"""The workflow model: one set of pydantic models, the single source of truth for the schema.

A definition is parsed from YAML/JSON into these models (see `parse.py`), then checked for
cross-references, cycles and expressions (see `validate.py`). Models are frozen.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema, model_validator

from wovyr.definition.durations import parse_duration, parse_timestamp

__all__ = [
    "ACTIVITY_KINDS",
    "Activity",
    "ApprovalWait",
    "ChildWorkflowSpec",
    "CompensateSpec",
    "Duration",
    "HttpSpec",
    "InputSpec",
    "InputType",
    "Metadata",
    "RetryPolicy",
    "ShellSpec",
    "TimerWait",
    "WaitSpec",
    "Workflow",
]

ACTIVITY_KINDS: tuple[str, ...] = ("tool", "http", "shell", "set", "wait", "workflow")
IDENT_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._\-]{0,127}$"

_DURATION_SCHEMA = {
    "anyOf": [
        {
            "type": "string",
            "pattern": r"^((\d+(\.\d+)?)(ms|s|m|h|d|w))+$|^P.*$",
            "description": "500ms, 30s, 5m, 2h, 30d, 1h30m or ISO 8601 (P1DT2H)",
        },
        {"type": "number", "minimum": 0, "description": "seconds"},
    ]
}
Duration = Annotated[float, BeforeValidator(parse_duration), WithJsonSchema(_DURATION_SCHEMA)]
Timestamp = Annotated[
    datetime,
    BeforeValidator(parse_timestamp),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]
Version = Annotated[
    str,
    BeforeValidator(
        lambda v: str(v) if isinstance(v, int | float) and not isinstance(v, bool) else v
    ),
    WithJsonSchema({"type": ["string", "integer"]}),
]
InputType = Literal["string", "number", "integer", "boolean", "object", "array"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Metadata(_Model):
    name: str = Field(pattern=NAME_PATTERN, description="Workflow name, unique per tenant")
    version: Version = Field(default="1", description="Version label, e.g. '3'")
    description: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)


class InputSpec(_Model):
    type: InputType = "string"
    required: bool = False
    default: Any = None
    enum: list[Any] | None = None
    description: str | None = None


class RetryPolicy(_Model):
    max_attempts: int = Field(default=3, ge=1, le=1000)
    initial_interval: Duration = 1.0
    backoff: float = Field(default=2.0, ge=1.0, le=100.0)
    max_interval: Duration = 60.0
    non_retryable: list[str] = Field(
        default_factory=list, description="Error type names that are never retried"
    )

    def delay(self, failed_attempt: int) -> float:
        """Seconds to wait after attempt number `failed_attempt` (1-based) failed."""
        raw = self.initial_interval * (self.backoff ** max(0, failed_attempt - 1))
        return float(min(raw, self.max_interval))


class HttpSpec(_Model):
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


class ShellSpec(_Model):
    argv: list[str] = Field(min_length=1, description="Program and arguments; no shell is used")
    cwd: str | None = None
    env: dict[str, str] = Field(default_factory=dict, description="Variables set for the process")
    inherit_env: list[str] = Field(
        default_factory=lambda: ["PATH"],
        description="Variables copied from the worker (allow-list)",
    )
    max_output_bytes: int = Field(default=1_048_576, ge=1, le=64 * 1_048_576)


class ApprovalWait(_Model):
    timeout: Duration | None = None
    approvers: list[str] = Field(default_factory=list)


class TimerWait(_Model):
    after: Duration | None = None
    at: Timestamp | None = None

    @model_validator(mode="after")
    def _one_of(self) -> TimerWait:
        if (self.after is None) == (self.at is None):
            raise ValueError("a timer takes exactly one of 'after' or 'at'")
        return self


class WaitSpec(_Model):
    signal: str | None = Field(default=None, pattern=NAME_PATTERN)
    approval: ApprovalWait | None = None
    timer: TimerWait | None = None

    @model_validator(mode="after")
    def _one_of(self) -> WaitSpec:
        given = [k for k in ("signal", "approval", "timer") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("a wait takes exactly one of 'signal', 'approval' or 'timer'")
        return self

    @property
    def kind(self) -> str:
        return "signal" if self.signal else "approval" if self.approval else "timer"


class ChildWorkflowSpec(_Model):
    name: str = Field(pattern=NAME_PATTERN)
    version: Version | None = None
    input: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None


class _Runnable(_Model):
    """Fields shared by activities and compensations: the kind keys and how to run them."""

    tool: str | None = Field(default=None, pattern=NAME_PATTERN)
    with_: dict[str, Any] = Field(default_factory=dict, alias="with")
    http: HttpSpec | None = None
    shell: ShellSpec | None = None
    set: dict[str, Any] | None = None
    retry: RetryPolicy | None = None
    timeout: Duration | None = None

    @property
    def kinds_given(self) -> list[str]:
        return [k for k in ACTIVITY_KINDS if getattr(self, k, None) is not None]

    @property
    def kind(self) -> str:
        given = self.kinds_given
        return given[0] if given else ""


class CompensateSpec(_Runnable):
    """What undoes a completed activity: a `tool`, `http`, `shell` or `set` step."""

    @model_validator(mode="after")
    def _one_kind(self) -> CompensateSpec:
        if len(self.kinds_given) != 1:
            raise ValueError("a compensation takes exactly one of 'tool', 'http', 'shell' or 'set'")
        return self


class Activity(_Runnable):
    id: str = Field(pattern=IDENT_PATTERN)
    description: str | None = None
    needs: list[str] = Field(default_factory=list)
    when: str | bool | None = None
    wait: WaitSpec | None = None
    workflow: ChildWorkflowSpec | None = None
    compensate: CompensateSpec | None = None
    for_each: str | None = Field(
        default=None, description="Run once per item of this list (`item`, `index` in scope)"
    )
    max_concurrency: int | None = Field(
        default=None,
        ge=1,
        le=10_000,
        description="Items of a for_each run at most this many at once",
    )

    @model_validator(mode="after")
    def _one_kind(self) -> Activity:
        given = self.kinds_given
        if len(given) != 1:
            what = "none" if not given else ", ".join(given)
            raise ValueError(
                f"an activity takes exactly one of {', '.join(ACTIVITY_KINDS)} (found {what})"
            )
        return self

    @property
    def is_wait(self) -> bool:
        return self.wait is not None


class Workflow(_Model):
    api_version: Literal["wovyr/v1"] = Field(alias="apiVersion")
    kind: Literal["Workflow"]
    metadata: Metadata
    inputs: dict[str, InputSpec] = Field(default_factory=dict)
    activities: list[Activity] = Field(min_length=1, max_length=10_000)
    output: Any = None
    timeout: Duration | None = None

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def version(self) -> str:
        return self.metadata.version

    def activity(self, activity_id: str) -> Activity:
        for act in self.activities:
            if act.id == activity_id:
                return act
        raise KeyError(activity_id)

    def activity_map(self) -> dict[str, Activity]:
        return {a.id: a for a in self.activities}
