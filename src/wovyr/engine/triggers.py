"""Event triggers: `kind: Trigger` documents (`wovyr.definition.trigger`) applied per tenant,
and what happens when an event arrives.

An event is a JSON payload posted to a topic (`receive_event`: `POST /api/v1/events/{topic}`
with an API key) or to a trigger's inbound webhook URL (`receive_webhook`: `POST
/api/v1/hooks/{hook_id}`, no key: an HMAC-SHA256 signature over `<timestamp>.<body>` with one
of the trigger's secrets, in `Wovyr-Signature: t=<unix seconds>,v1=<hex>`, compared in
constant time; a timestamp outside the trigger's tolerance, or a signature seen before within
it, is a replay). A bad signature is `SignatureRefused` (401) and nothing is recorded against
the tenant: the request proved nothing.

Each trigger that takes the event, in order: the payload's size and JSON are checked (over
the cap or not JSON: `rejected`); the filter (false: `filtered`); the rate (`limit` per `per`
seconds of events started or signalled: `limited`); the dedup key (a key held by an
execution that exists: `duplicate`, naming it); then the start (through `Engine.submit`,
the tenant's quotas applying: a refusal is `limited`) or the signal. Every outcome is recorded
(`TriggerEventRecord`, never the payload) and listed by `list_events`.

The dedup key is claimed before the start, for the execution id the start will use: a crash
between the two leaves the key held by an execution that does not exist, which the next
delivery of the same event finds and starts under that same id (a start is idempotent by
id), so the event starts one execution, never two and never none. A signal trigger claims
the key for the execution it signals and marks the signal with `<trigger>:<key>`: the next
delivery of an event whose key is held sends the signal unless that execution's log holds
one with the mark (checked again inside the append, so two deliveries at once send one).
`tests/reliability/test_trigger_crash.py` kills the receiving process at every commit.
"""

from __future__ import annotations

import json
import secrets as token_source
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wovyr.activities.outbound import SIGNATURE_HEADER, signature_of
from wovyr.definition.expr import evaluate_condition, render
from wovyr.definition.parse import read_source
from wovyr.definition.trigger import TriggerDocument, load_trigger
from wovyr.engine.changes import signalled
from wovyr.errors import (
    Conflict,
    ExpressionError,
    InputError,
    NotFound,
    QuotaExceeded,
    WovyrError,
)
from wovyr.ids import new_id
from wovyr.store.events import DedupClaim, EventPage, TriggerEventRecord, TriggerRecord

if TYPE_CHECKING:
    from wovyr.engine.engine import Engine

__all__ = [
    "MAX_EVENT_BYTES",
    "SIGNATURE_HEADER",
    "Received",
    "SignatureRefused",
    "apply_trigger",
    "delete_trigger",
    "list_events",
    "list_triggers",
    "named_trigger",
    "receive_event",
    "receive_webhook",
    "trigger_view",
]

MAX_EVENT_BYTES = 262_144  # an event payload larger than this starts nothing (rejected)
_REPLAY = "~webhook:"  # dedup keys of the signatures a trigger has accepted


class SignatureRefused(WovyrError):
    """The webhook's signature is missing, wrong, expired or replayed."""


@dataclass(frozen=True)
class Received:
    """What came of one event: one record per trigger that took it (or one `unmatched`)."""

    records: list[TriggerEventRecord]

    @property
    def status(self) -> int:
        """The HTTP status that says it: 202 when a trigger took it (started, signalled,
        duplicate or filtered), else the refusal's (413 too large, 400 not JSON, 404 no
        trigger, 429 limited, 422 a failure)."""
        outcomes = {r.outcome for r in self.records}
        if outcomes & {"started", "signalled", "duplicate", "filtered"}:
            return 202
        for outcome, reason, status in (
            ("rejected", "too large", 413),
            ("rejected", "", 400),
            ("unmatched", "", 404),
            ("limited", "", 429),
        ):
            if any(r.outcome == outcome and reason in r.reason for r in self.records):
                return status
        return 422

    def to_dict(self) -> dict[str, Any]:
        return {"events": [event_view(r) for r in self.records]}


def event_view(record: TriggerEventRecord) -> dict[str, Any]:
    """What the API and the CLI show of a received event (its tenant is the caller's)."""
    shown = asdict(record)
    del shown["tenant"]
    return {**shown, "received_at": record.received_at.isoformat()}


def trigger_view(record: TriggerRecord) -> dict[str, Any]:
    """What the API and the CLI show of a trigger: its document (secret NAMES only) and its
    webhook path when it has one."""
    return {
        "name": record.name,
        "topic": record.topic,
        "webhook_path": None if record.hook_id is None else f"/api/v1/hooks/{record.hook_id}",
        "document": record.document,
        "updated_at": record.updated_at.isoformat(),
        "updated_by": record.updated_by,
    }


# --- the registry ------------------------------------------------------------------------


def apply_trigger(
    engine: Engine, source: str | bytes | Path, *, filename: str = "<input>"
) -> tuple[str, TriggerRecord]:
    """Register a trigger document: ("applied" | "unchanged", record). Its webhook keeps
    the URL it had (a new one gets a new random id). Audited as `trigger.apply`."""
    if isinstance(source, Path):
        filename, source = str(source), read_source(source)
    document = load_trigger(source, filename)
    store, tenant = engine.store, engine.tenant
    before = store.get_trigger(tenant, document.name)
    hook_id = None
    if document.spec.webhook is not None:
        kept = before.hook_id if before is not None else None
        hook_id = kept or f"hk_{token_source.token_urlsafe(24)}"
    canonical = document.model_dump(mode="json", by_alias=True, exclude_none=True)
    record = TriggerRecord(
        tenant,
        document.name,
        document.spec.topic,
        hook_id,
        canonical,
        engine.clock.now(),
        engine.actor or "",
    )
    audit = engine.audit_entry("trigger.apply", document.name, {"topic": document.spec.topic})
    outcome = store.put_trigger(record, audit=audit)
    return outcome, record if outcome == "applied" or before is None else before


def list_triggers(engine: Engine) -> list[TriggerRecord]:
    return engine.store.list_triggers(engine.tenant)


def named_trigger(engine: Engine, name: str) -> TriggerRecord:
    record = engine.store.get_trigger(engine.tenant, name)
    if record is None:
        raise NotFound(f"no trigger {name!r}", hint="apply one with `wovyr triggers apply FILE`")
    return record


def delete_trigger(engine: Engine, name: str) -> None:
    audit = engine.audit_entry("trigger.delete", name)
    if not engine.store.delete_trigger(engine.tenant, name, audit=audit):
        raise NotFound(f"no trigger {name!r}")


def list_events(
    engine: Engine,
    *,
    trigger: str | None = None,
    before: tuple[datetime, str] | None = None,
    limit: int = 50,
) -> EventPage:
    return engine.store.list_trigger_events(
        engine.tenant, trigger=trigger, before=before, limit=limit
    )


# --- events ------------------------------------------------------------------------------


def receive_event(
    engine: Engine, topic: str, body: bytes, *, max_bytes: int = MAX_EVENT_BYTES
) -> Received:
    """An event posted to `topic` by an API key of the engine's tenant: every trigger of
    the topic takes it (none: one `unmatched` record)."""
    triggers = engine.store.list_triggers(engine.tenant, topic)
    if not triggers:
        return Received([_record(engine, "api", topic, None, body, "unmatched", "no trigger")])
    return Received([_take(engine, "api", t, body, max_bytes) for t in triggers])


def receive_webhook(
    engine: Engine,
    hook_id: str,
    body: bytes,
    headers: Mapping[str, str],
    *,
    max_bytes: int = MAX_EVENT_BYTES,
) -> Received:
    """An event posted to a trigger's webhook URL: `engine` is acting for no one yet; the
    trigger's tenant is found by the URL's id (an unknown one answers like a bad signature:
    a probe learns nothing), and the signature is checked before anything is recorded."""
    record = engine.store.trigger_by_hook(hook_id)
    if record is None:
        raise SignatureRefused("the webhook signature is not valid")
    # what it starts or signals is audited as made by the trigger (no key signed it)
    tenant_engine = engine.for_tenant(record.tenant).acting(f"trigger:{record.name}")
    document = TriggerDocument.model_validate(record.document)
    webhook = document.spec.webhook
    if webhook is None:  # pragma: no cover - a stored hook id always has a webhook
        raise SignatureRefused("the webhook signature is not valid")
    now = engine.clock.now()
    keys = [_secret(tenant_engine, name) for name in webhook.secrets]
    signature = signature_of(headers.get(SIGNATURE_HEADER, ""), body, keys, now, webhook.tolerance)
    if signature is None:
        raise SignatureRefused("the webhook signature is not valid (or outside its tolerance)")
    # The signature is held for the id its event will be recorded under. Held, and that
    # event recorded: a replay. Held with no event: the request was taken and its process
    # died before it recorded an outcome; the sender's retry of the same request is taken
    # again when the trigger has a dedup key (which makes a second take start or signal
    # nothing new), else refused (at most once).
    event_id = new_id(now)
    until = now + timedelta(seconds=webhook.tolerance * 2)
    replay = DedupClaim(record.tenant, f"{_REPLAY}{record.name}", signature, event_id, now, until)
    held = engine.store.claim_dedup_key(replay)
    if held is not None:
        if document.spec.dedup is None or engine.store.get_trigger_event(record.tenant, held):
            raise SignatureRefused("the webhook signature was used before (a replay)")
        event_id = held
    return Received([_take(tenant_engine, "webhook", record, body, max_bytes, event_id)])


def _secret(engine: Engine, name: str) -> bytes:
    resolver = engine.secrets
    if resolver is None:
        raise SignatureRefused("the webhook signature is not valid")
    try:
        return resolver.resolve_secret(engine.tenant, name).encode()
    except NotFound:
        raise SignatureRefused("the webhook signature is not valid") from None


def _record(
    engine: Engine,
    source: str,
    topic: str,
    trigger: str | None,
    body: bytes,
    outcome: str,
    reason: str = "",
    execution_id: str | None = None,
    dedup_key: str | None = None,
    event_id: str | None = None,
) -> TriggerEventRecord:
    now = engine.clock.now()
    record = TriggerEventRecord(
        engine.tenant,
        event_id or new_id(now),
        now,
        source,
        topic,
        trigger,
        outcome,
        reason[:500],
        execution_id,
        None if dedup_key is None else dedup_key[:200],
        len(body),
    )
    engine.store.record_trigger_event(record)
    return record


def _take(
    engine: Engine,
    source: str,
    record: TriggerRecord,
    body: bytes,
    max_bytes: int,
    event_id: str | None = None,
) -> TriggerEventRecord:
    """What `record`'s trigger makes of one event (recorded, under `event_id` if given)."""

    def done(outcome: str, reason: str = "", **kw: Any) -> TriggerEventRecord:
        return _record(
            engine,
            source,
            record.topic,
            record.name,
            body,
            outcome,
            reason,
            event_id=event_id,
            **kw,
        )

    if len(body) > max_bytes:
        return done("rejected", f"the payload is too large ({len(body)} > {max_bytes} bytes)")
    try:
        payload = json.loads(body)
    except (ValueError, RecursionError):
        return done("rejected", "the payload is not JSON")
    document = TriggerDocument.model_validate(record.document)
    spec = document.spec
    now = engine.clock.now()
    context = {
        "payload": payload,
        "event": {"topic": record.topic, "source": source, "received_at": now.isoformat()},
    }
    try:
        if not evaluate_condition(spec.filter, context, where="filter"):
            return done("filtered", "the filter is false")
        key = None
        if spec.dedup is not None:
            key = _text(render(spec.dedup.key, context, where="dedup.key"))
        if spec.signal is not None:
            target = _text(render(spec.signal.execution, context, where="signal.execution"))
        mapped = render(spec.input, context, where="input") if spec.input is not None else None
    except ExpressionError as exc:
        return done("failed", str(exc))
    if spec.rate is not None:
        since = now - timedelta(seconds=spec.rate.per)
        if engine.store.count_trigger_starts(engine.tenant, record.name, since) >= spec.rate.limit:
            return done("limited", f"rate limit: {spec.rate.limit} per {spec.rate.per:g} s")
    execution_id = target if spec.signal is not None else new_id(now)
    mark = None if key is None else f"{record.name}:{key}"  # on the signal it sends
    recheck = False
    if key is not None and spec.dedup is not None:
        until = now + timedelta(seconds=spec.dedup.ttl)
        claim = DedupClaim(engine.tenant, record.name, key, execution_id, now, until)
        held = engine.store.claim_dedup_key(claim)
        if held is not None:
            if spec.signal is not None:
                assert mark is not None
                if signalled(engine.store, engine.tenant, held, mark):
                    return done("duplicate", "", execution_id=held, dedup_key=key)
                recheck = True  # claimed, then the signal was lost (or is on its way): once
            elif engine.store.load(held, engine.tenant) is not None:
                return done("duplicate", "", execution_id=held, dedup_key=key)
            execution_id = held  # claimed, then the start was lost: start it under that id
    try:
        if spec.signal is not None:
            given = payload if mapped is None else mapped
            engine.signal(execution_id, spec.signal.name, given, dedup=mark, recheck=recheck)
            return done("signalled", "", execution_id=execution_id, dedup_key=key)
        assert spec.start is not None
        given = payload if mapped is None else mapped
        started = engine.submit(
            None,
            given if isinstance(given, dict) else {"payload": given},
            name=spec.start.workflow,
            version=spec.start.version,
            execution_id=execution_id,
        )
    except QuotaExceeded as exc:
        return done("limited", str(exc), dedup_key=key)
    except (InputError, NotFound, Conflict) as exc:
        return done("failed", _message(exc), dedup_key=key)
    return done("started", "", execution_id=started.record.id, dedup_key=key)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _message(exc: WovyrError) -> str:
    if isinstance(exc, InputError) and exc.problems:
        return "; ".join(p.message for p in exc.problems[:3])
    return str(exc)
