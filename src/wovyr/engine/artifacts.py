"""Artifacts: bytes a tenant stores once by content hash and steps reference by digest
(`{type: image, artifact: "sha256:..."}`; `wovyr.store.artifacts`).

`put_artifact` checks the media type (one a content part takes: PNG, JPEG, GIF, WebP, PDF)
and the size (`MAX_ARTIFACT_BYTES`), and stores the bytes under their digest: the first put
debits their size from the tenant's `stored_bytes_per_day` quota when it has one (refused
past it: `QuotaExceeded`, nothing stored) and is audited as `artifact.put`; the same bytes
again store, debit and audit nothing. Another tenant's artifact is a missing one.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from wovyr.engine.engine import Engine
from wovyr.engine.quotas import STORED, day_of, quotas_of, seconds_to_midnight
from wovyr.errors import InputError, NotFound, Problem
from wovyr.store.artifacts import (
    ARTIFACT_TYPES,
    ArtifactRecord,
    NewArtifact,
    artifact_digest,
    is_digest,
)
from wovyr.store.records import Debit

__all__ = [
    "MAX_ARTIFACT_BYTES",
    "ArtifactTooLarge",
    "UnsupportedMediaType",
    "artifact_ref",
    "artifact_view",
    "list_artifacts",
    "media_type_of",
    "put_artifact",
    "read_artifact",
]

MAX_ARTIFACT_BYTES = 20 * 1_048_576


class ArtifactTooLarge(InputError):
    """The artifact is larger than an artifact may be."""


class UnsupportedMediaType(InputError):
    """The media type is not one a content part takes."""


def media_type_of(given: str) -> str:
    """`given` (a Content-Type, parameters allowed) as an artifact's media type, or
    `UnsupportedMediaType`."""
    media_type = given.split(";", maxsplit=1)[0].strip().lower()
    if media_type not in ARTIFACT_TYPES:
        raise UnsupportedMediaType(
            [Problem(f"an artifact is one of {', '.join(ARTIFACT_TYPES)}", path="media_type")]
        )
    return media_type


def put_artifact(engine: Engine, data: bytes, media_type: str) -> tuple[ArtifactRecord, bool]:
    """Store `data` as an artifact of the engine's tenant: (its record, True when stored
    now; False when the tenant had those bytes already)."""
    kind = media_type_of(media_type)
    if len(data) > MAX_ARTIFACT_BYTES:
        raise ArtifactTooLarge(
            [Problem(f"an artifact is at most {MAX_ARTIFACT_BYTES} bytes", path="body")]
        )
    if not data:
        raise InputError([Problem("an artifact is not empty", path="body")])
    now = engine.clock.now()
    digest = artifact_digest(data)
    new = NewArtifact(
        engine.tenant,
        digest,
        kind,
        len(data),
        data,
        now,
        engine.actor or "",
        debits=_debits(engine, len(data), now),
    )
    audit = engine.audit_entry("artifact.put", digest, {"media_type": kind, "size": len(data)})
    return engine.store.put_artifact(new, audit=audit)


def _debits(engine: Engine, size: int, now: datetime) -> tuple[Debit, ...]:
    limit = quotas_of(engine.store, engine.tenant).stored_bytes_per_day
    if limit is None:
        return ()
    return (Debit(STORED, size, day_of(now), limit, seconds_to_midnight(now)),)


def read_artifact(engine: Engine, digest: str) -> tuple[ArtifactRecord, bytes]:
    """The engine's tenant's artifact `digest` and its bytes; `NotFound`."""
    found = engine.store.read_artifact(engine.tenant, digest) if is_digest(digest) else None
    if found is None:
        raise NotFound(f"no artifact {digest!r}", hint="put one with `wovyr artifacts put FILE`")
    return found


def list_artifacts(
    engine: Engine, *, before: tuple[datetime, str] | None = None, limit: int = 50
) -> tuple[list[ArtifactRecord], tuple[datetime, str] | None]:
    """A page of the tenant's artifacts, newest first, and where the next page starts."""
    found = engine.store.list_artifacts(engine.tenant, before=before, limit=limit + 1)
    more = len(found) > limit
    page = found[:limit]
    return page, (page[-1].created_at, page[-1].digest) if more and page else None


def artifact_ref(record: ArtifactRecord) -> dict[str, str]:
    """The content part that names `record`: an image, or a file with a filename."""
    if record.media_type == "application/pdf":
        return {"type": "file", "artifact": record.digest, "filename": "document.pdf"}
    return {"type": "image", "artifact": record.digest}


def artifact_view(record: ArtifactRecord) -> dict[str, Any]:
    """An artifact as the API and the CLI show it; `ref` is the content part that sends it
    to a model (in an `llm` message or an agent's attachments)."""
    return {
        "digest": record.digest,
        "media_type": record.media_type,
        "size": record.size,
        "ref": artifact_ref(record),
        "created_at": record.created_at.isoformat(),
        "created_by": record.created_by,
    }
