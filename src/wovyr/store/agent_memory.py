"""Agent memory: per-tenant namespaces of durable items (the `memory` activity kind and an
agent's `memory:NAMESPACE` tools, `docs/memory.md`).

An item is keyed by (tenant, namespace, key) and holds a JSON `value`, an optional `text`
and, when the text was embedded, its embedding (float32, little-endian, in a blob) with the
name of the model that made it. `expires_at` (a ttl) makes an item invisible from that
moment on; expired rows are purged lazily by the next write to their namespace. Another
tenant's namespace answers exactly like an empty one.

**Exactly one effect per write.** A write may carry a `write_id` (the activity attempt's
idempotency key): the store records it beside the write, in the write's own transaction,
with what the write did. A write whose `write_id` is already recorded writes nothing and
answers what the first one did (`MemoryWriteResult.applied` is False), so an attempt re-run
after a crash between its memory write and its step's commit leaves exactly one effect.
Records of write ids are kept `WRITE_ID_DAYS` days (purged by later writes of the tenant).

**Versions.** Each item counts its writes (`version`: 1 for the first put of a key, one
more for each put after it; a delete drops the item and its count). Each namespace has a
version too, bumped by every write to it in the write's transaction, and each item keeps
the namespace's version of its last write (its `seq`); a namespace also counts the deletes
that removed a row. A process that caches something derived from a namespace (the search
matrix, `wovyr.store.vectors`) knows from one read whether the cache is still the
namespace's, whoever wrote since, and if not, reads only the items written after it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal, Protocol

from wovyr.store.audit import AuditEntry
from wovyr.store.frozen import record

__all__ = [
    "WRITE_ID_DAYS",
    "AgentMemoryStore",
    "MemoryDelete",
    "MemoryFilter",
    "MemoryHit",
    "MemoryItem",
    "MemoryPut",
    "MemoryWriteResult",
    "VectorColumns",
]

WRITE_ID_DAYS = 30  # how long a write id is remembered (a re-run comes within the lease)


@record
class MemoryItem:
    tenant: str
    namespace: str
    key: str
    value: Any  # JSON data
    text: str | None
    embedding_model: str | None  # the model that embedded `text` (None: not embedded)
    version: int  # the item's writes since it was created
    updated_at: datetime
    expires_at: datetime | None = None


@record
class MemoryPut:
    """Insert or replace the item at (tenant, namespace, key)."""

    tenant: str
    namespace: str
    key: str
    value: Any = None
    text: str | None = None
    embedding: bytes | None = None  # float32 little-endian, see `wovyr.store.vectors.pack`
    embedding_model: str | None = None
    expires_at: datetime | None = None
    write_id: str | None = None  # the writer's idempotency key (see the module docstring)


@record
class MemoryDelete:
    """Drop the item at (tenant, namespace, key)."""

    tenant: str
    namespace: str
    key: str
    write_id: str | None = None  # as `MemoryPut.write_id`


@record
class MemoryFilter:
    """The items of (tenant, namespace) whose key starts with `prefix`, by key, after key
    `after`, at most `limit`."""

    tenant: str
    namespace: str
    prefix: str = ""
    after: str = ""
    limit: int = 100


@record
class MemoryWriteResult:
    op: Literal["put", "delete"]
    key: str
    version: int  # the item's version after a put; 0 after a delete
    existed: bool  # a live item was at the key before the write
    applied: bool = True  # False: the write id was recorded already, nothing was written


@record
class MemoryHit:
    item: MemoryItem
    score: float  # cosine similarity of the query and the item's text, in [-1, 1]


@record
class VectorColumns:
    """A namespace's embedded items as the search matrix is built (or brought up to date)
    from (`wovyr.store.vectors`): columns, not one object per item (100k items are read)."""

    keys: list[str]
    embeddings: list[bytes | None]  # float32 little-endian; None: not embedded by the model
    expires: list[float]  # POSIX seconds; math.inf for an item without expiry


class AgentMemoryStore(Protocol):
    """Per-tenant memory namespaces (see the module docstring). `now` decides expiry."""

    def put_memory(
        self, put: MemoryPut, now: datetime, *, audit: AuditEntry | None = None
    ) -> MemoryWriteResult:
        """Write `put` (one transaction with its write id record, the namespace's version
        bump, the lazy purge of the namespace's expired items and `audit`, appended when
        the write applies)."""
        ...

    def delete_memory(
        self, delete: MemoryDelete, now: datetime, *, audit: AuditEntry | None = None
    ) -> MemoryWriteResult:
        """Drop the item at the key (`existed`: there was a live one; `audit` is appended
        only then)."""
        ...

    def get_memory(
        self, tenant: str, namespace: str, keys: Sequence[str], now: datetime
    ) -> list[MemoryItem]:
        """The live items at `keys` (missing and expired ones left out), in the order of
        `keys`."""
        ...

    def list_memory(self, query: MemoryFilter, now: datetime) -> list[MemoryItem]:
        """The items `query` selects that are live at `now`."""
        ...

    def memory_version(self, tenant: str, namespace: str) -> int:
        """The namespace's version: 0 before its first write, then one more per write."""
        ...

    def memory_vectors(
        self, tenant: str, namespace: str, model: str, after: int = 0
    ) -> VectorColumns:
        """With `after` 0, every item of the namespace embedded by `model` (expired ones
        too: the search masks them, so its cached matrix stays valid while items expire);
        else every item written after namespace version `after`, its embedding None unless
        `model` made it (an item that lost its text or changed model leaves the matrix)."""
        ...

    def search_memory(
        self,
        tenant: str,
        namespace: str,
        vector: Sequence[float],
        model: str,
        top_k: int,
        now: datetime,
    ) -> list[MemoryHit]:
        """The `top_k` live items embedded by `model` nearest to `vector` by cosine, best
        first (`wovyr.store.vectors.VectorSearch` does it for every store)."""
        ...
