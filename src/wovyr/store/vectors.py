"""The embedded nearest-neighbour search of agent memory, the same on every store.

There is no vector index (pgvector is not assumed on PostgreSQL): a namespace's embeddings
of one model are loaded once into a float32 matrix, normalised, and a search is one
matrix-vector product (numpy, imported by the first search only) and a partial sort.
The matrix is cached per (tenant, namespace, model, dimensions) in this process, tagged
with the namespace's version (`AgentMemoryStore.memory_version`), which every write bumps
in its own transaction: a search reads the version first (one indexed read) and rebuilds
the matrix when it moved, so it is never answered from a matrix older than a write another
process committed before it. Expired items stay in the matrix and are masked at search
time (expiry does not bump the version). The cache holds at most `max_floats` numbers
(least recently searched matrices go first).
"""

from __future__ import annotations

import functools
import struct
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from wovyr.store.agent_memory import MemoryHit, MemoryItem, VectorColumns

__all__ = ["DEFAULT_MAX_FLOATS", "VectorCache", "VectorSearch", "pack", "unpack"]

DEFAULT_MAX_FLOATS = 64_000_000  # 256 MB of float32 across every cached namespace


def pack(vector: Sequence[float]) -> bytes:
    """`vector` as float32 little-endian bytes (what a store keeps)."""
    return struct.pack(f"<{len(vector)}f", *vector)


def unpack(blob: bytes) -> list[float]:
    return list(struct.unpack(f"<{len(blob) // 4}f", blob))


@dataclass(frozen=True)
class _Matrix:
    version: int
    keys: list[str]
    vectors: Any  # npt.NDArray[np.float32], (n, dims), rows normalised
    expires: Any  # npt.NDArray[np.float64]: POSIX seconds, +inf for no expiry


class VectorCache:
    """Normalised matrices by (tenant, namespace, model, dims), tagged with a version."""

    def __init__(self, max_floats: int = DEFAULT_MAX_FLOATS) -> None:
        self.max_floats = max_floats
        self._lock = threading.Lock()
        self._matrices: OrderedDict[tuple[str, str, str, int], _Matrix] = OrderedDict()
        self.builds = 0  # matrices built (tests and the benchmark read it)

    def get(self, key: tuple[str, str, str, int], version: int) -> _Matrix | None:
        with self._lock:
            found = self._matrices.get(key)
            if found is None or found.version != version:
                return None
            self._matrices.move_to_end(key)
            return found

    def put(self, key: tuple[str, str, str, int], matrix: _Matrix) -> None:
        with self._lock:
            self.builds += 1
            self._matrices[key] = matrix
            self._matrices.move_to_end(key)
            total = sum(m.vectors.size for m in self._matrices.values())
            while total > self.max_floats and len(self._matrices) > 1:
                _, dropped = self._matrices.popitem(last=False)
                total -= dropped.vectors.size


def _build(version: int, columns: VectorColumns, dims: int) -> _Matrix:
    import numpy as np

    size = dims * 4
    fitting = [i for i, blob in enumerate(columns.embeddings) if len(blob) == size]
    if len(fitting) < len(columns.keys):  # other dimensions: compared with other queries
        columns = VectorColumns(
            [columns.keys[i] for i in fitting],
            [columns.embeddings[i] for i in fitting],
            [columns.expires[i] for i in fitting],
        )
    n = len(columns.keys)
    vectors = np.frombuffer(b"".join(columns.embeddings), dtype="<f4").reshape(n, dims)
    vectors = vectors.astype(np.float32)  # a writable copy, in the machine's byte order
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    vectors /= norms
    expires = np.array(columns.expires, dtype=np.float64)
    return _Matrix(version, columns.keys, vectors, expires)


def _nearest(
    matrix: _Matrix, query: Sequence[float], k: int, now: datetime
) -> list[tuple[str, float]]:
    import numpy as np

    if not matrix.keys or k <= 0:
        return []
    q = np.asarray(query, dtype=np.float32)
    norm = float(np.linalg.norm(q))
    if norm == 0.0:
        return []
    scores = matrix.vectors @ (q / norm)
    scores[matrix.expires <= now.timestamp()] = -np.inf
    k = min(k, len(matrix.keys))
    top = np.argpartition(-scores, k - 1)[:k]
    top = top[np.argsort(-scores[top], kind="stable")]
    return [(matrix.keys[i], float(scores[i])) for i in top if np.isfinite(scores[i])]


class VectorSearch:
    """`search_memory` for a store that has the rest of `AgentMemoryStore` (mixed in)."""

    def memory_version(self, tenant: str, namespace: str) -> int:
        raise NotImplementedError  # the store's own

    def memory_vectors(self, tenant: str, namespace: str, model: str) -> VectorColumns:
        raise NotImplementedError  # the store's own

    def get_memory(
        self, tenant: str, namespace: str, keys: Sequence[str], now: datetime
    ) -> list[MemoryItem]:
        raise NotImplementedError  # the store's own

    @functools.cached_property
    def vector_cache(self) -> VectorCache:
        return VectorCache()

    def search_memory(
        self,
        tenant: str,
        namespace: str,
        vector: Sequence[float],
        model: str,
        top_k: int,
        now: datetime,
    ) -> list[MemoryHit]:
        dims = len(vector)
        key = (tenant, namespace, model, dims)
        version = self.memory_version(tenant, namespace)  # before the rows: see the docstring
        matrix = self.vector_cache.get(key, version)
        if matrix is None:
            matrix = _build(version, self.memory_vectors(tenant, namespace, model), dims)
            self.vector_cache.put(key, matrix)
        nearest = _nearest(matrix, vector, top_k, now)
        items = {i.key: i for i in self.get_memory(tenant, namespace, [k for k, _ in nearest], now)}
        # an item deleted since the matrix was built is left out; one replaced keeps the
        # score of the text it had (the next search rebuilds: the version moved)
        return [MemoryHit(items[k], score) for k, score in nearest if k in items]
