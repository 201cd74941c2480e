"""The audit chain: records, their canonical hash, signed anchors and the `AuditStore` role.

Every mutation made by an actor (an API key over HTTP, the host's user on the CLI) appends
one `AuditRecord` in the SAME transaction as the change: the write methods of the other
roles take it as `audit=` (on `NewExecution` and `StepWrite` it is a field), and a store
appends it only when the change itself applies (a refused or conflicting write leaves no
record, and a rolled-back transaction takes its record with it).

All writers extend ONE chain: record `seq` n holds `prev_hash` = the hash of record n - 1
(`GENESIS` for the first) and `hash` = SHA-256 of its canonical encoding (`canonical`),
which covers every field but `hash`. A store serialises appends on the chain head inside
the writing transaction (SQLite: `BEGIN IMMEDIATE` holds the file's write lock; PostgreSQL:
the `audit_head` row is locked `FOR UPDATE`), so two processes never take the same seq
or fork the chain.

An `AuditAnchor` is an HMAC over (seq, hash) of the head at some moment, kept in a table of
its own; the key never reaches the store (`wovyr.platform.audit` signs and checks). Details
hold hashes of payloads (`payload_digest`), never the payloads nor secret values.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import field
from datetime import UTC, datetime
from typing import Any, ParamSpec, Protocol

from wovyr.store.frozen import record

__all__ = [
    "GENESIS",
    "AuditAnchor",
    "AuditEntry",
    "AuditRecord",
    "AuditStore",
    "canonical",
    "chain_hash",
    "next_record",
    "payload_digest",
]

GENESIS = "0" * 64  # the prev_hash of record 1

_P = ParamSpec("_P")


def _iso(at: datetime) -> str:
    """One spelling of a time in the hash: UTC, microseconds, `+00:00`."""
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return at.astimezone(UTC).isoformat(timespec="microseconds")


def payload_digest(value: Any) -> str:
    """`sha256:<hex>` of a payload's canonical JSON: what a record keeps of a payload (an
    input, a signal's payload, a definition), so the record proves which payload it was
    without holding it."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


@record
class AuditEntry:
    """What a caller asks to be recorded; the store gives it its seq and hashes."""

    at: datetime
    tenant: str
    actor: str  # `key:<id>/<role>` over the API, `local:<user>` on the host
    action: str  # e.g. `execution.start`, `schedule.pause`, `api_key.create`
    target: str  # what was changed: an execution id, a schedule id, a key id, a tenant
    details: Mapping[str, Any] = field(default_factory=dict)  # hashes and small facts only


@record
class AuditRecord:
    seq: int
    at: datetime
    tenant: str
    actor: str
    action: str
    target: str
    details: dict[str, Any]
    prev_hash: str
    hash: str

    def expected_hash(self) -> str:
        """The hash this record's fields give (equal to `hash` unless it was changed)."""
        return chain_hash(
            self.seq,
            self.at,
            self.tenant,
            self.actor,
            self.action,
            self.target,
            self.details,
            self.prev_hash,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "at": _iso(self.at),
            "tenant": self.tenant,
            "actor": self.actor,
            "action": self.action,
            "target": self.target,
            "details": self.details,
            "prev_hash": self.prev_hash,
            "hash": self.hash,
        }


@record
class AuditAnchor:
    """A signed statement that the chain's record `seq` had hash `hash` at `at`."""

    seq: int
    hash: str
    mac: str  # hex HMAC-SHA256 over `anchor_message(seq, hash)`
    at: datetime


def canonical(
    seq: int,
    at: datetime,
    tenant: str,
    actor: str,
    action: str,
    target: str,
    details: Mapping[str, Any],
    prev_hash: str,
) -> bytes:
    """The bytes a record's hash covers: JSON with sorted keys, no spaces, UTF-8."""
    body = {
        "seq": seq,
        "at": _iso(at),
        "tenant": tenant,
        "actor": actor,
        "action": action,
        "target": target,
        "details": dict(details),
        "prev_hash": prev_hash,
    }
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _sha256_of(body: Callable[_P, bytes]) -> Callable[_P, str]:
    def digest(*args: _P.args, **kwargs: _P.kwargs) -> str:
        return hashlib.sha256(body(*args, **kwargs)).hexdigest()

    return digest


chain_hash = _sha256_of(canonical)
"""A record's hash: the hex SHA-256 of `canonical` of the same arguments."""


def next_record(entry: AuditEntry, head_seq: int, head_hash: str) -> AuditRecord:
    """The record that extends a chain whose head is (`head_seq`, `head_hash`) with `entry`
    (a store calls this inside its transaction, with the head it locked)."""
    seq = head_seq + 1
    details = json.loads(json.dumps(dict(entry.details), default=str))  # as stored
    digest = chain_hash(
        seq, entry.at, entry.tenant, entry.actor, entry.action, entry.target, details, head_hash
    )
    return AuditRecord(
        seq=seq,
        at=entry.at,
        tenant=entry.tenant,
        actor=entry.actor,
        action=entry.action,
        target=entry.target,
        details=details,
        prev_hash=head_hash,
        hash=digest,
    )


class AuditStore(Protocol):
    def append_audit(self, entry: AuditEntry) -> AuditRecord:
        """Append `entry` on its own (for an action that changes nothing else in the store)."""
        ...

    def audit_head(self) -> AuditRecord | None:
        """The last record of the chain (None while it is empty)."""
        ...

    def audit_records(
        self,
        *,
        after_seq: int = 0,
        limit: int = 1000,
        tenant: str | None = None,
        since: datetime | None = None,
    ) -> list[AuditRecord]:
        """Records with seq > `after_seq`, in seq order (of `tenant` only, when given; at
        or after `since`, when given)."""
        ...

    def add_audit_anchor(self, anchor: AuditAnchor) -> None: ...

    def audit_anchors(self) -> list[AuditAnchor]:
        """Every anchor, oldest first (by seq, then time)."""
        ...
