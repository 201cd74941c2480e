"""Artifacts: bytes a tenant stores once, by content hash, that steps reference
(`{type: image, artifact: "sha256:..."}` in an `llm` message or an agent's attachments).

An artifact is keyed by (tenant, digest), the digest `sha256:<hex>` of its bytes: putting
the same bytes again stores nothing new, and the same bytes put by two tenants are two
rows (another tenant's artifact answers exactly like a missing one). A row holds the media
type, the size, the bytes, when and by whom it was first put. The bytes are a payload: a
tenant that seals its payloads has them sealed (`wovyr.store.sealing`), the digest, media
type and size stay plain (what a list shows and a reference names).

The first put of an artifact debits its size from the tenant's `stored_bytes_per_day`
quota (a checked debit: the put the quota refuses writes nothing) and appends its audit
record, both in the put's transaction; a put of bytes already stored does neither.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from wovyr.store.audit import AuditEntry
from wovyr.store.frozen import record
from wovyr.store.records import Debit

__all__ = [
    "ARTIFACT_TYPES",
    "DIGEST_PATTERN",
    "ArtifactRecord",
    "ArtifactStore",
    "NewArtifact",
    "artifact_digest",
    "is_digest",
]

#: The media types an artifact may have: those a message's content parts take.
ARTIFACT_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp", "application/pdf")
DIGEST_PATTERN = r"^sha256:[0-9a-f]{64}$"
_DIGEST = re.compile(DIGEST_PATTERN)


def artifact_digest(data: bytes) -> str:
    """The digest that names `data`: `sha256:<hex>`."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def is_digest(text: str) -> bool:
    return _DIGEST.match(text) is not None


@record
class ArtifactRecord:
    """What is known of a stored artifact besides its bytes."""

    tenant: str
    digest: str
    media_type: str
    size: int  # of the bytes as put (not as stored, which a sealing tenant's are not)
    created_at: datetime
    created_by: str = ""


@record
class NewArtifact:
    """Bytes to store; `digest` is `artifact_digest(data)` of the bytes as put (a sealing
    store hands its inner store `data` sealed, the digest and size of the plain bytes)."""

    tenant: str
    digest: str
    media_type: str
    size: int
    data: bytes
    created_at: datetime
    created_by: str = ""
    debits: Sequence[Debit] = ()  # the tenant's budgets the first put uses (checked)


class ArtifactStore(Protocol):
    def put_artifact(
        self, new: NewArtifact, *, audit: AuditEntry | None = None
    ) -> tuple[ArtifactRecord, bool]:
        """Store `new` unless its tenant has its digest: the record stored, and True when
        it was stored now (then, in the same transaction, its `debits` are taken, checked:
        `QuotaExceeded` and nothing written when one is refused, and `audit` appended)."""
        ...

    def get_artifact(self, tenant: str, digest: str) -> ArtifactRecord | None: ...

    def read_artifact(self, tenant: str, digest: str) -> tuple[ArtifactRecord, bytes] | None:
        """The artifact and its bytes, or None when the tenant has none of that digest."""
        ...

    def list_artifacts(
        self, tenant: str, *, before: tuple[datetime, str] | None = None, limit: int = 50
    ) -> list[ArtifactRecord]:
        """`tenant`'s artifacts newest first (by created time, then digest), those before
        `before` (a created time and a digest) when given; one more than `limit` is never
        returned."""
        ...
