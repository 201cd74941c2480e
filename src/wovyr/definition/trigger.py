"""Trigger definitions (`kind: Trigger`): what starts or signals executions when an event
arrives.

    apiVersion: wovyr/v1
    kind: Trigger
    metadata: {name: orders-created}
    spec:
      topic: orders.created              # POST /api/v1/events/orders.created
      webhook: {secrets: [ORDERS_HOOK]}  # and an inbound URL, HMAC-signed with that secret
      filter: "${{ payload.total > 100 }}"
      start: {workflow: fulfil}          # or signal: {execution: "${{ ... }}", name: paid}
      input: {order: "${{ payload.order }}"}
      dedup: {key: "${{ payload.id }}", ttl: 1d}
      rate: {limit: 100, per: 1m}

Expressions (`filter`, `input`, `dedup.key`, `signal.execution`) are the workflows' CEL
(`wovyr.definition.expr`) over `payload` (the event's JSON) and `event` (its `topic`, `id`,
`source`, `received_at`); each is compiled when the document is checked, so a typo is a
located problem at apply time, never a surprise on the first event.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from wovyr.definition.expr import compile_expression, iter_expressions
from wovyr.definition.locate import validated
from wovyr.definition.parse import Limits, parse_document
from wovyr.definition.source import SourceMap
from wovyr.errors import DefinitionError, ExpressionError, Problem
from wovyr.fields import NAME_PATTERN, Duration, FrozenModel

__all__ = [
    "EVENT_ROOTS",
    "TOPIC_PATTERN",
    "TriggerDocument",
    "load_trigger",
]

#: The names a trigger's expressions may read.
EVENT_ROOTS = frozenset({"payload", "event"})
TOPIC_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._\-]{0,127}$"
_SECRET = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"


class TriggerMetadata(FrozenModel):
    name: str = Field(pattern=NAME_PATTERN, description="Trigger name, unique per tenant")
    description: str | None = None


class WebhookSpec(FrozenModel):
    """An inbound webhook URL, its requests signed with HMAC-SHA256."""

    secrets: list[str] = Field(
        min_length=1,
        max_length=2,
        description="The NAMES of the tenant's secrets a signature may be made with (two "
        "while a key is rotated)",
    )
    tolerance: Duration = Field(
        default=300, gt=0, le=3600, description="How old a signed timestamp may be"
    )

    @model_validator(mode="after")
    def _names(self) -> WebhookSpec:
        import re

        for name in self.secrets:
            if not re.fullmatch(_SECRET, name):
                raise ValueError(f"{name!r} is not a secret name")
        return self


class StartSpec(FrozenModel):
    workflow: str = Field(pattern=NAME_PATTERN, description="A registered workflow's name")
    version: str | None = Field(default=None, description="Default: the latest applied")


class SignalSpec(FrozenModel):
    execution: str = Field(description="The execution's id (usually an expression)")
    name: str = Field(min_length=1, max_length=128, description="The signal's name")


class DedupSpec(FrozenModel):
    key: str = Field(min_length=1, description="An expression giving the event's key")
    ttl: Duration = Field(default=86_400, gt=0, le=90 * 86_400, description="How long a key holds")


class RateSpec(FrozenModel):
    limit: int = Field(ge=1, le=1_000_000, description="Events started or signalled ...")
    per: Duration = Field(default=60, gt=0, le=86_400, description="... per this window")


class TriggerSpec(FrozenModel):
    topic: str = Field(pattern=TOPIC_PATTERN, description="The topic events are posted to")
    webhook: WebhookSpec | None = None
    filter: str | None = Field(default=None, description="A condition on the payload")
    start: StartSpec | None = None
    signal: SignalSpec | None = None
    input: Any = Field(default=None, description="The start's input (or the signal's payload)")
    dedup: DedupSpec | None = None
    rate: RateSpec | None = None

    @model_validator(mode="after")
    def _one_action(self) -> TriggerSpec:
        if (self.start is None) == (self.signal is None):
            raise ValueError("give exactly one of start and signal")
        return self


class TriggerDocument(FrozenModel):
    api_version: Literal["wovyr/v1"] = Field(alias="apiVersion")
    kind: Literal["Trigger"]
    metadata: TriggerMetadata
    spec: TriggerSpec

    @property
    def name(self) -> str:
        return self.metadata.name


def _expression_problems(document: TriggerDocument, smap: SourceMap) -> list[Problem]:
    spec = document.spec
    places: list[tuple[tuple[str | int, ...], Any]] = [
        (("spec", "filter"), spec.filter),
        (("spec", "input"), spec.input),
    ]
    if spec.dedup is not None:
        places.append((("spec", "dedup", "key"), spec.dedup.key))
    if spec.signal is not None:
        places.append((("spec", "signal", "execution"), spec.signal.execution))
    problems = []
    for path, value in places:
        for src in iter_expressions(value):
            try:
                refs = compile_expression(src).refs
            except ExpressionError as exc:
                problems.append(smap.problem(str(exc), path))
                continue
            unknown = sorted(refs.roots - EVENT_ROOTS)
            if unknown:
                message = f"a trigger's expressions read payload and event, not {unknown[0]!r}"
                problems.append(smap.problem(message, path))
    return problems


def load_trigger(
    source: str | bytes, filename: str = "<input>", limits: Limits | None = None
) -> TriggerDocument:
    """Parse and check a trigger document; DefinitionError carries every located problem."""
    data, smap = parse_document(source, filename, limits)
    if data.get("kind") != "Trigger":
        problem = smap.problem("this is not a trigger (kind: Trigger)", ("kind",))
        raise DefinitionError([problem])
    document = validated(TriggerDocument, data, smap)
    problems = _expression_problems(document, smap)
    if problems:
        raise DefinitionError(problems)
    return document
