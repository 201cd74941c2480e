"""What the `memory` kind and an agent's `memory:NAMESPACE` tools use: the tenant's memory
namespaces (`MemoryAccess`, built by the worker over the store's `AgentMemoryStore` role,
`Dispatch.memory`) and embeddings from the tenant's providers (`embed_texts`).

Items cross this seam as JSON data (`{key, value, text, version, updated_at, expires_at}`,
times as ISO text), which is also what an activity outputs and a model is shown.
Every write carries a write id (the attempt's idempotency key, or the tool call's): the
store records it with the write in one transaction, so an attempt re-run after a crash
between its write and its step's commit writes nothing again and answers as the first
write did (`docs/memory.md`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Protocol

from wovyr.activities.base import NonRetryableError
from wovyr.activities.policy import TRUSTED, SideEffectPolicy
from wovyr.activities.providers import ModelAccess, embed
from wovyr.kinds.steps import MAX_TOP_K, EmbeddingSpec

__all__ = [
    "MAX_KEY_CHARS",
    "MAX_TOP_K",
    "NAMESPACE_PATTERN",
    "NAMESPACE_RULE",
    "EmbeddingSpec",
    "MemoryAccess",
    "MemoryBackend",
    "check_namespace",
    "embed_texts",
    "is_namespace",
]

NAMESPACE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:\-]{0,127}$"
MAX_KEY_CHARS = 512
_NAMESPACE = re.compile(NAMESPACE_PATTERN)


class MemoryBackend(Protocol):
    """One tenant's memory namespaces (the worker's adapter over the store)."""

    def put(
        self,
        namespace: str,
        key: str,
        value: Any,
        text: str | None,
        embedding: list[float] | None,
        model: str | None,
        ttl: float | None,
        write_id: str | None,
    ) -> dict[str, Any]:
        """`{key, version, replaced, applied}` (`applied`: False for a replayed write id)."""
        ...

    def delete(self, namespace: str, key: str, write_id: str | None) -> dict[str, Any]:
        """`{key, deleted, applied}`."""
        ...

    def get(self, namespace: str, key: str) -> dict[str, Any] | None: ...

    def list_items(
        self, namespace: str, prefix: str, after: str, limit: int
    ) -> list[dict[str, Any]]: ...

    def search(
        self, namespace: str, vector: list[float], model: str, top_k: int
    ) -> list[dict[str, Any]]:
        """The items nearest `vector`, best first, each with its `score`."""
        ...


@dataclass(frozen=True)
class MemoryAccess:
    """What the worker hands a kind for one attempt (`Dispatch.memory`)."""

    tenant: str
    backend: MemoryBackend = field(repr=False)


NAMESPACE_RULE = "letters, digits and . _ - : (at most 128, starting with a letter or digit)"


def is_namespace(namespace: Any) -> bool:
    """Whether `namespace` is a namespace's name (`NAMESPACE_RULE`)."""
    return isinstance(namespace, str) and _NAMESPACE.match(namespace) is not None


def check_namespace(namespace: Any) -> str:
    """`namespace` if it is one, else the attempt's failure (not retried)."""
    if not is_namespace(namespace):
        raise NonRetryableError(
            f"invalid memory namespace {namespace!r}: {NAMESPACE_RULE}", type="InvalidInput"
        )
    assert isinstance(namespace, str)
    return namespace


async def embed_texts(
    models: ModelAccess | None,
    spec: EmbeddingSpec,
    texts: list[str],
    *,
    timeout: float | None,
    policy: SideEffectPolicy = TRUSTED,
) -> list[list[float]]:
    """The embeddings of `texts` from `spec`'s provider (its key from the tenant's secrets,
    under the side-effect policy, like a model call)."""
    if models is None:
        raise NonRetryableError("this worker cannot call model providers", type="UnknownProvider")
    import asyncio

    if models.quota is not None:
        reason = await asyncio.to_thread(models.quota)
        if reason is not None:
            raise NonRetryableError(reason, type="QuotaExceeded")
    provider = models.providers.get(spec.provider)
    key = await asyncio.to_thread(models.api_key, spec.provider)
    result = await embed(provider, key, spec.model, texts, timeout=timeout, policy=policy)
    return result.vectors
