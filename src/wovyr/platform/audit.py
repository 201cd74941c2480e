"""The audit chain's checks: signed anchors and `verify`.

The chain itself is written by the stores (`wovyr.store.audit`), one record per audited
change in the change's transaction. This module signs and checks what proves it whole:

- every record's `hash` is the SHA-256 of its canonical fields and its `prev_hash`, and
  every `prev_hash` is the previous record's `hash`, seqs 1, 2, 3... without a gap: an
  edited, deleted, inserted or moved record breaks the walk at its seq;
- an anchor is an HMAC-SHA256, under the KMS's audit anchor key, over (seq, hash) of
  the head at some moment, kept in a table of its own: a chain that ends before an anchor's
  seq was truncated, and a chain rewritten with recomputed hashes no longer has the hash an
  anchor signed (an attacker without the key cannot sign new anchors).

Every function that needs the key takes it as `anchor_key: bytes`; where it comes from is
the edge's business (`wovyr.platform.secrets.audit_anchor_key`: from a KMS data key that a
rotation re-wraps, so anchors outlive a rotation of the root key). Anchors that exist but
cannot be checked (no key) make the chain fail: whoever holds the database could have
rewritten the chain and forged them, so an unchecked anchor proves nothing.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass, field
from datetime import datetime

from wovyr.store.audit import GENESIS, AuditAnchor, AuditRecord, AuditStore

__all__ = ["AuditVerdict", "anchor_mac", "verify_chain", "write_anchor"]

_PAGE = 1000


def anchor_mac(anchor_key: bytes, seq: int, digest: str) -> str:
    """The hex HMAC-SHA256 an anchor of (seq, hash) carries."""
    message = f"wovyr-audit-anchor\n{seq}\n{digest}".encode()
    return hmac.new(anchor_key, message, hashlib.sha256).hexdigest()


def write_anchor(store: AuditStore, anchor_key: bytes, at: datetime) -> AuditAnchor | None:
    """Sign the chain's head now and record the anchor; None while the chain is empty."""
    head = store.audit_head()
    if head is None:
        return None
    anchor = AuditAnchor(head.seq, head.hash, anchor_mac(anchor_key, head.seq, head.hash), at)
    store.add_audit_anchor(anchor)
    return anchor


@dataclass(frozen=True)
class AuditVerdict:
    """What `verify_chain` found: `problems` as (seq, reason), the lowest seq first."""

    records: int
    head_seq: int
    anchors: int
    anchors_signed: bool  # the anchors' HMACs were checked (a key was given)
    problems: list[tuple[int, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def first(self) -> tuple[int, str] | None:
        return self.problems[0] if self.problems else None


def verify_chain(
    store: AuditStore, anchor_key: bytes | None, *, unchecked_anchors_ok: bool = False
) -> AuditVerdict:
    """Walk the whole chain and check it against every anchor. Without `anchor_key` the
    anchors' signatures cannot be checked (a forged anchor would pass): that is a problem
    of its own while any anchor exists, unless `unchecked_anchors_ok` (a backup checked
    where its root key is not: it says so, and its restore checks them); the chain's own
    links, and truncation below an anchor's seq, are checked either way."""
    anchors = store.audit_anchors()
    wanted = {a.seq for a in anchors}
    hashes: dict[int, str] = {}
    chain_problem: tuple[int, str] | None = None
    expected, prev, count, after = 1, GENESIS, 0, 0
    while True:
        page = store.audit_records(after_seq=after, limit=_PAGE)
        if not page:
            break
        for record in page:
            count += 1
            if record.seq in wanted:
                hashes[record.seq] = record.hash
            if chain_problem is None:
                chain_problem = _link_problem(record.seq, expected, record, prev)
            expected, prev = record.seq + 1, record.hash
        after = page[-1].seq
    head = after
    problems = [chain_problem] if chain_problem else []
    if anchor_key is None and anchors and not unchecked_anchors_ok:
        problems.append(
            (
                min(a.seq for a in anchors),
                f"{len(anchors)} anchor(s) cannot be checked without the anchor key: a "
                "rewritten chain with forged anchors would look the same",
            )
        )
    for anchor in anchors:
        when = anchor.at.isoformat()
        if anchor_key is not None and not hmac.compare_digest(
            anchor.mac, anchor_mac(anchor_key, anchor.seq, anchor.hash)
        ):
            problems.append(
                (
                    anchor.seq,
                    f"the anchor of seq {anchor.seq} signed at {when} has a bad signature "
                    "(forged, or signed with another key)",
                )
            )
        elif anchor.seq > head:
            problems.append(
                (
                    head + 1,
                    f"the chain ends at seq {head} but the anchor signed at {when} covers seq "
                    f"{anchor.seq}: records {head + 1}..{anchor.seq} were removed (truncated)",
                )
            )
        elif hashes.get(anchor.seq) != anchor.hash:
            problems.append(
                (
                    anchor.seq,
                    f"its hash differs from the one the anchor signed at {when}: the chain "
                    "was rewritten up to here",
                )
            )
    problems.sort(key=lambda p: p[0])
    return AuditVerdict(count, head, len(anchors), anchor_key is not None, problems)


def _link_problem(
    seq: int, expected: int, record: AuditRecord, prev: str
) -> tuple[int, str] | None:
    if seq != expected:
        missing = f"{expected}" if seq == expected + 1 else f"{expected}..{seq - 1}"
        return (expected, f"record {missing} is missing (deleted)")
    if record.expected_hash() != record.hash:
        return (seq, "its hash does not match its contents (the record was edited or moved)")
    if record.prev_hash != prev:
        return (
            seq,
            f"its prev_hash is not the hash of record {seq - 1} (a record before it was "
            "replaced, or records were swapped)",
        )
    return None
