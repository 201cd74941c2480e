"""The workflow model: one set of pydantic models, the single source of truth for the schema.

A definition is parsed from YAML/JSON into these models (see `parse.py`), then checked for
cross-references, cycles and expressions (see `validate.py`). Models are frozen.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, TypeVar

from pydantic import (
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    SkipValidation,
    ValidationError,
    model_serializer,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic.json_schema import SkipJsonSchema

from wovyr.fields import IDENT_PATTERN, NAME_PATTERN, Duration, FrozenModel, Timestamp, Version
from wovyr.kinds.steps import (
    ApprovalWait,
    ChildWorkflowSpec,
    HttpSpec,
    ShellSpec,
    TimerWait,
    WaitSpec,
    WaitStep,
)
from wovyr.kinds.table import DECLARED as KINDS
from wovyr.kinds.table import Declaration

__all__ = [
    "IDENT_PATTERN",
    "NAME_PATTERN",
    "Activity",
    "ApprovalWait",
    "ChildWorkflowSpec",
    "CodeSpec",
    "CompensateSpec",
    "ConcurrencySpec",
    "ContinueAsNewSpec",
    "Duration",
    "HttpSpec",
    "InputSpec",
    "InputType",
    "KeyLimit",
    "Metadata",
    "Named",
    "RateLimitSpec",
    "RepeatSpec",
    "RetryPolicy",
    "RevealedWorkflow",
    "ShellSpec",
    "TimerWait",
    "Timestamp",
    "WaitSpec",
    "WaitStep",
    "Workflow",
    "activity_kinds",
]

InputType = Literal["string", "number", "integer", "boolean", "object", "array"]
_Model = FrozenModel
_Step = TypeVar("_Step")


def activity_kinds(*, compensating: bool = False) -> list[str]:
    """The keys that select a kind (those that may undo an activity, with `compensating`)."""
    return [k.name for k in KINDS.kinds() if k.compensates or not compensating]


class Metadata(_Model):
    name: str = Field(pattern=NAME_PATTERN, description="Workflow name, unique per tenant")
    version: Version = Field(default="1", description="Version label, e.g. '3'")
    description: str | None = None
    # Not part of the language (a document that fills it is refused: the top-level
    # `labels:` labels executions) and so not in the schema; kept for what Wovyr writes
    # itself (an agent's workflow is marked `wovyr.agent`) and for definitions stored so.
    labels: SkipJsonSchema[dict[str, str]] = Field(default_factory=dict)


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


_DEFAULT_RETRY = RetryPolicy()


@dataclass(frozen=True)
class _NoKind:
    """The kind keys of an activity that gave none, several, or one it may not use here."""

    found: tuple[str, ...]


class _Runnable(_Model):
    """What activities and compensations share: one kind, chosen by its key (`tool`, `http`,
    ... see `wovyr.kinds`), and how to run it. The keys the kind owns are
    validated by the kind's model into `step` and dumped back as they were written."""

    kind: SkipJsonSchema[str] = Field(default="", exclude=True)
    step: SkipJsonSchema[SkipValidation[Any]] = Field(default=None, exclude=True)
    retry: RetryPolicy | None = None
    timeout: Duration | None = None

    what: ClassVar[str] = "an activity"
    compensating: ClassVar[bool] = False

    @model_validator(mode="before")
    @classmethod
    def _kind_keys(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "step" in data:
            return data
        given = [k for k in data if KINDS.owner_of(k) == k]
        allowed = activity_kinds(compensating=cls.compensating)
        if len(given) != 1 or given[0] not in allowed:
            # Reported after the other keys are checked (see `_one_kind`), as one problem.
            rest = {k: v for k, v in data.items() if KINDS.owner_of(k) is None}
            return {**rest, "step": _NoKind(tuple(given))}
        kind = KINDS.get(given[0])
        owned = {k: v for k, v in data.items() if KINDS.owner_of(k) == kind.name}
        rest = {k: v for k, v in data.items() if k not in owned}
        try:
            step = kind.model.model_validate(owned)
        except ValidationError as exc:
            raise exc from None  # its locations are relative to the activity: kept as they are
        return {**rest, "kind": kind.name, "step": step}

    @model_validator(mode="after")
    def _one_kind(self) -> _Runnable:
        if isinstance(self.step, _NoKind):
            allowed = activity_kinds(compensating=self.compensating)
            what = ", ".join(self.step.found) or "none"
            raise ValueError(
                f"{self.what} takes exactly one of {', '.join(allowed)} (found {what})"
            )
        return self

    @model_serializer(mode="wrap")
    def _dump_kind_keys(
        self, handler: SerializerFunctionWrapHandler, info: SerializationInfo
    ) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if isinstance(self.step, FrozenModel):
            data.update(
                self.step.model_dump(
                    mode=info.mode,
                    by_alias=bool(info.by_alias),
                    exclude_unset=info.exclude_unset,
                    exclude_defaults=info.exclude_defaults,
                    exclude_none=info.exclude_none,
                )
            )
        return data

    @classmethod
    def document_fields(cls) -> dict[str, FieldInfo]:
        """The keys a document may use here, by name: the kinds' keys, then the model's own
        (aliases where set)."""
        fields: dict[str, FieldInfo] = {}
        for name in activity_kinds(compensating=cls.compensating):
            kind = KINDS.get(name)
            fields.update({f.alias or n: f for n, f in kind.model.model_fields.items()})
        own = {f.alias or n: f for n, f in cls.model_fields.items() if n not in ("kind", "step")}
        return {**fields, **own}

    @property
    def kind_entry(self) -> Declaration:
        """This activity's kind as the language declares it (`wovyr.kinds`)."""
        return KINDS.get(self.kind)

    def step_of(self, model: type[_Step]) -> _Step | None:
        """The validated kind keys when they are a `model` (e.g. `WaitStep`), else None."""
        return self.step if isinstance(self.step, model) else None

    @property
    def effective_retry(self) -> RetryPolicy:
        """`retry`, or the kind's default (children and waits run once unless asked)."""
        if self.retry is not None:
            return self.retry
        attempts = self.kind_entry.default_attempts
        return _DEFAULT_RETRY if attempts == 3 else RetryPolicy(max_attempts=attempts)


class CompensateSpec(_Runnable):
    """What undoes a completed activity: a step of a kind that may compensate."""

    what: ClassVar[str] = "a compensation"
    compensating: ClassVar[bool] = True


class RepeatSpec(FrozenModel):
    """Run the activity again until `until` holds: each iteration is a full run of the step
    (with its own retries), a durable timer of `every` between iterations."""

    until: str = Field(
        description="A single ${{ }} expression evaluated after each iteration; `output` is "
        "that iteration's output and `iteration` its number (1, 2, ...)"
    )
    every: Duration | None = Field(
        default=None, description="Wait this long between iterations (a durable timer)"
    )
    max_iterations: int = Field(
        default=100, ge=1, le=1_000_000, description="Then the activity ends as on_exhausted says"
    )
    on_exhausted: Literal["fail", "continue"] = Field(
        default="fail",
        description="fail: the activity fails (RepeatExhausted); continue: it completes with "
        "the last output and activities.ID.exhausted true",
    )


class KeyLimit(FrozenModel):
    """At most `limit` attempts of activities naming the same key run at once, across every
    execution and worker of the tenant; an attempt finding none free waits (a durable
    timer; it holds no worker slot and is not a retry)."""

    key: str = Field(
        min_length=1,
        max_length=500,
        description="Text with ${{ }} expressions over inputs and activities, e.g. "
        '"db-${{ inputs.shard }}"',
    )
    limit: int = Field(ge=1, le=10_000, description="Running attempts per key")


class RateLimitSpec(FrozenModel):
    """A token bucket shared by every worker of the tenant: `limit` units per `per`, at most
    `burst` at once (default `limit`). An attempt finding too few units waits for them (a
    durable timer, shown as `rate limit KEY: next slot in S s`; not a retry). Without
    `limit`, the bucket must have been declared (`wovyr admin limits set KEY ...`); a
    declared bucket's numbers win over an activity's."""

    key: str = Field(
        min_length=1,
        max_length=500,
        description="The bucket's name (text with ${{ }} expressions over inputs allowed)",
    )
    limit: float | None = Field(default=None, gt=0, description="Units per `per`")
    per: Duration = Field(default=1.0, description="The period of `limit`, e.g. 1s, 1m")
    units: float | str = Field(
        default=1,
        description="Units one attempt takes: a number, or a ${{ }} expression (e.g. "
        "tokens); `input` is the attempt's rendered input",
    )
    burst: float | None = Field(
        default=None, gt=0, description="The bucket's capacity (default: `limit`)"
    )


class Activity(_Runnable):
    id: str = Field(pattern=IDENT_PATTERN)
    description: str | None = None
    needs: list[str] = Field(default_factory=list)
    when: str | bool | None = None
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
    repeat: RepeatSpec | None = Field(
        default=None, description="Run the step again until a condition holds"
    )
    concurrency: KeyLimit | None = Field(
        default=None, description="A limit on running attempts that share a key"
    )
    rate_limit: RateLimitSpec | None = Field(
        default=None, description="Units of a shared token bucket each attempt takes"
    )
    on_failure: Literal["fail", "continue"] = Field(
        default="fail",
        description="continue: once its retries are exhausted the activity ends failed and "
        "the workflow goes on; downstream activities read activities.ID.status and .error "
        "and route with `when`",
    )

    @property
    def continues(self) -> bool:
        """A failure of this activity (retries exhausted) is caught: the workflow goes on."""
        return self.on_failure == "continue"


class ContinueAsNewSpec(FrozenModel):
    """When the workflow would complete and `when` holds, this run ends `continued` and a
    new run of the same definition version starts with `input`, in the same transaction."""

    when: str = Field(
        description="A single ${{ }} expression, evaluated when the workflow would complete "
        "(`output` is the workflow's output)"
    )
    input: dict[str, Any] = Field(
        default_factory=dict,
        description="The next run's inputs (expressions allowed); inputs not named keep "
        "this run's values",
    )


class ConcurrencySpec(FrozenModel):
    """At most `limit` executions of the workflow run at once per value of `key` (per
    tenant); the others wait for a slot in start order, or `on_limit` cancels one."""

    key: str = Field(
        min_length=1,
        max_length=500,
        description="The key's value: text with ${{ }} expressions over `inputs`, e.g. "
        '"order-${{ inputs.customer_id }}"; executions whose keys are equal share the limit',
    )
    limit: int = Field(default=1, ge=1, le=10_000, description="Running executions per key")
    on_limit: Literal["queue", "cancel_new", "cancel_oldest"] = Field(
        default="queue",
        description="queue: wait for a slot in start order; cancel_new: the new execution "
        "ends cancelled; cancel_oldest: the oldest running one is cancelled for it",
    )


class _Metadata(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def version(self) -> str: ...


class Named:
    """A document's `name` and `version`: those of its `metadata`."""

    if TYPE_CHECKING:
        metadata: _Metadata

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def version(self) -> str:
        return self.metadata.version


class CodeSpec(FrozenModel):
    """What a workflow written as a Python function (`@wovyr.workflow`) is stored as: the
    function's name (shown, never imported from here: a worker runs only functions its own
    modules registered) and the digest of its source and version (what an execution pins)."""

    function: str = Field(min_length=1, max_length=500)
    digest: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")


class Workflow(Named, _Model):
    api_version: Literal["wovyr/v1"] = Field(alias="apiVersion")
    kind: Literal["Workflow"]
    metadata: Metadata
    inputs: dict[str, InputSpec] = Field(default_factory=dict)
    # at least one, unless `code` reveals them as its function runs (`_has_activities`)
    activities: list[Activity] = Field(max_length=10_000, json_schema_extra={"minItems": 1})
    output: Any = None
    labels: dict[str, str] = Field(
        default_factory=dict,
        description="Labels of each execution, for search (`customer: acme`); values may be "
        "`${{ ... }}` expressions over `inputs`, rendered when the execution starts",
    )
    timeout: Duration | None = None
    continue_as_new: ContinueAsNewSpec | None = Field(
        default=None,
        description="End this run `continued` and start the next run of the chain when "
        "`when` holds at completion (bounded history for workflows that live forever)",
    )
    concurrency: ConcurrencySpec | None = Field(
        default=None, description="A limit on running executions that share a key"
    )
    # Not part of the language (a document that fills it is refused): set by
    # `@wovyr.workflow` for a workflow written as a Python function (`wovyr.code`).
    code: SkipJsonSchema[CodeSpec | None] = None

    @model_validator(mode="after")
    def _has_activities(self) -> Workflow:
        if not self.activities and self.code is None:
            raise ValueError("activities: a workflow needs at least one activity")
        return self

    @property
    def completion_held(self) -> bool:
        """The decider must not complete the execution even when every activity is done (a
        code workflow whose function has not returned yet: `RevealedWorkflow`)."""
        return False

    @property
    def failure(self) -> dict[str, Any] | None:
        """An error that fails the execution (after its compensations): what a code
        workflow's function raised (`RevealedWorkflow`)."""
        return None

    def step_info(self, activity_id: str) -> dict[str, Any] | None:
        """What the history records of a code workflow's step when it is scheduled (the
        call's `source` line, the steps it came `after`); None for a definition's own."""
        return None

    def activity(self, activity_id: str) -> Activity:
        """The activity `activity_id` (KeyError if none): a dict lookup, made once per
        definition (the runner and the decider ask on every step)."""
        entry = _BY_ID.get(id(self))
        if entry is None or entry[0]() is not self or entry[1] is not self.activities:
            by_id: dict[str, Activity] = {}
            for act in self.activities:
                by_id.setdefault(act.id, act)
            key = id(self)
            entry = (weakref.ref(self, lambda _: _BY_ID.pop(key, None)), self.activities, by_id)
            _BY_ID[key] = entry
        return entry[2][activity_id]

    def activity_map(self) -> dict[str, Activity]:
        return {a.id: a for a in self.activities}


class RevealedWorkflow(Workflow):
    """A code workflow as far as one replay of its function revealed it (`wovyr.code`): the
    activities its calls asked for, `held` until the function returned (its `output` is
    then the value returned), `raised` when it raised. Made per decision, never stored."""

    held: bool = False
    raised: dict[str, Any] | None = None
    steps: dict[str, dict[str, Any]] = Field(default_factory=dict)

    @property
    def completion_held(self) -> bool:
        return self.held

    @property
    def failure(self) -> dict[str, Any] | None:
        return self.raised

    def step_info(self, activity_id: str) -> dict[str, Any] | None:
        return self.steps.get(activity_id)


# Workflow -> its activities by id, kept beside the (frozen, compared-by-value) model rather
# than in it; keyed by identity and checked against the list it was made from.
_BY_ID: dict[int, tuple[weakref.ref[Workflow], list[Activity], dict[str, Activity]]] = {}
