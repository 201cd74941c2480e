"""The embedded nearest-neighbour search of agent memory, the same on every store.

There is no vector index (pgvector is not assumed on PostgreSQL): a namespace's embeddings
of one model are loaded once into a float32 matrix, normalised, and a search is one
matrix-vector product (numpy, from the `memory` extra, imported by the first search only)
and a partial sort.
The matrix is cached per (tenant, namespace, model, dimensions) in this process, tagged
with the namespace's version and its count of deletes (`AgentMemoryStore.memory_marks`),
which every write moves in its own transaction: a search reads them first (one indexed
read), so it is never answered from a matrix older than a write another process committed
before it. When only the version moved (puts), the items written since are read (by their
`seq`) and the matrix is updated: replaced rows overwritten, new ones appended, an item
that lost its embedding masked. When a delete removed a row, the matrix is rebuilt from
every embedding. Expired items stay in the matrix and are masked at search time (expiry
does not move the version). An update copies the matrix (searches in other threads keep
reading the one they hold). The cache holds at most `max_floats` numbers (least recently
searched matrices go first).
"""

from __future__ import annotations

import functools
import struct
import threading
from collections import OrderedDict
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from wovyr.errors import ConfigError
from wovyr.store.agent_memory import MemoryHit, MemoryItem, VectorColumns
from wovyr.store.frozen import record

__all__ = ["DEFAULT_MAX_FLOATS", "VectorCache", "VectorSearch", "pack", "unpack"]

DEFAULT_MAX_FLOATS = 64_000_000  # 256 MB of float32 across every cached namespace


def pack(vector: Sequence[float]) -> bytes:
    """`vector` as float32 little-endian bytes (what a store keeps)."""
    return struct.pack(f"<{len(vector)}f", *vector)


def unpack(blob: bytes) -> list[float]:
    return list(struct.unpack(f"<{len(blob) // 4}f", blob))


@record
class _Matrix:
    version: int
    deletes: int
    keys: list[str]
    vectors: Any  # npt.NDArray[np.float32], (n, dims), rows normalised
    expires: Any  # npt.NDArray[np.float64]: POSIX seconds, +inf none, -inf a dead row
    rows: dict[str, int]  # key -> its row


class VectorCache:
    """Normalised matrices by (tenant, namespace, model, dims), tagged with a version."""

    def __init__(self, max_floats: int = DEFAULT_MAX_FLOATS) -> None:
        self.max_floats = max_floats
        self._lock = threading.Lock()
        self._matrices: OrderedDict[tuple[str, str, str, int], _Matrix] = OrderedDict()
        self.builds = 0  # matrices built from every embedding (tests and the benchmark)
        self.updates = 0  # matrices brought up to date from the items written since

    def get(self, key: tuple[str, str, str, int]) -> _Matrix | None:
        with self._lock:
            found = self._matrices.get(key)
            if found is not None:
                self._matrices.move_to_end(key)
            return found

    def put(self, key: tuple[str, str, str, int], matrix: _Matrix, *, update: bool) -> None:
        with self._lock:
            if update:
                self.updates += 1
            else:
                self.builds += 1
            self._matrices[key] = matrix
            self._matrices.move_to_end(key)
            total = sum(m.vectors.size for m in self._matrices.values())
            while total > self.max_floats and len(self._matrices) > 1:
                _, dropped = self._matrices.popitem(last=False)
                total -= dropped.vectors.size


def _numpy() -> Any:
    """numpy, or a ConfigError naming the extra that brings it: semantic search is the only
    user of numpy, so the core install goes without it."""
    try:
        import numpy
    except ImportError:
        raise ConfigError(
            "agent memory's semantic search needs numpy, which the core install leaves out",
            hint="install the memory extra: pip install 'wovyr[memory]'",
        ) from None
    return numpy


def _normalised(columns: VectorColumns, dims: int) -> tuple[list[int], Any]:
    """The rows of `columns` that hold an embedding of `dims` dimensions, and those
    embeddings as a normalised (n, dims) float32 matrix."""
    np = _numpy()

    size = dims * 4
    fitting = [i for i, blob in enumerate(columns.embeddings) if blob and len(blob) == size]
    blobs = columns.embeddings
    if len(fitting) < len(blobs):
        blobs = [blobs[i] for i in fitting]
    joined = b"".join(b for b in blobs if b is not None)
    vectors = np.frombuffer(joined, dtype="<f4").reshape(len(fitting), dims)
    vectors = vectors.astype(np.float32)  # a writable copy, in the machine's byte order
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    vectors /= norms
    return fitting, vectors


def _build(marks: tuple[int, int], columns: VectorColumns, dims: int) -> _Matrix:
    np = _numpy()

    fitting, vectors = _normalised(columns, dims)
    keys = [columns.keys[i] for i in fitting]
    expires = np.array([columns.expires[i] for i in fitting], dtype=np.float64)
    return _Matrix(*marks, keys, vectors, expires, {k: i for i, k in enumerate(keys)})


def _updated(old: _Matrix, marks: tuple[int, int], changed: VectorColumns, dims: int) -> _Matrix:
    """`old` with the items written since it was built: a copy, so readers of `old` are
    undisturbed."""
    np = _numpy()

    fitting, vectors = _normalised(changed, dims)
    keys, rows = list(old.keys), dict(old.rows)
    expires = old.expires.copy()
    for i in range(len(changed.keys)):  # first: an item that left the model's set dies
        row = rows.get(changed.keys[i])
        if row is not None:
            expires[row] = -np.inf
    replaced: list[tuple[int, int]] = []  # (row, index into vectors)
    added: list[int] = []
    for j, i in enumerate(fitting):
        row = rows.get(changed.keys[i])
        if row is None:
            added.append(j)
        else:
            replaced.append((row, j))
            expires[row] = changed.expires[i]
    matrix = old.vectors.copy()
    for row, j in replaced:
        matrix[row] = vectors[j]
    if added:
        matrix = np.vstack([matrix, vectors[added]])
        for j in added:
            rows[changed.keys[fitting[j]]] = len(keys)
            keys.append(changed.keys[fitting[j]])
        tail = np.array([changed.expires[fitting[j]] for j in added], dtype=np.float64)
        expires = np.concatenate([expires, tail])
    return _Matrix(*marks, keys, matrix, expires, rows)


def _nearest(
    matrix: _Matrix, query: Sequence[float], k: int, now: datetime
) -> list[tuple[str, float]]:
    np = _numpy()

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

    def memory_marks(self, tenant: str, namespace: str) -> tuple[int, int]:
        raise NotImplementedError  # the store's own

    def memory_vectors(
        self, tenant: str, namespace: str, model: str, after: int = 0
    ) -> VectorColumns:
        raise NotImplementedError  # the store's own

    def memory_version(self, tenant: str, namespace: str) -> int:
        return self.memory_marks(tenant, namespace)[0]

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
        marks = self.memory_marks(tenant, namespace)  # before the rows: see the docstring
        matrix = self.vector_cache.get(key)
        if matrix is None or matrix.deletes != marks[1] or matrix.version > marks[0]:
            matrix = _build(marks, self.memory_vectors(tenant, namespace, model), dims)
            self.vector_cache.put(key, matrix, update=False)
        elif matrix.version < marks[0]:
            changed = self.memory_vectors(tenant, namespace, model, after=matrix.version)
            matrix = _updated(matrix, marks, changed, dims)
            self.vector_cache.put(key, matrix, update=True)
        nearest = _nearest(matrix, vector, top_k, now)
        items = {i.key: i for i in self.get_memory(tenant, namespace, [k for k, _ in nearest], now)}
        # an item deleted since the matrix was built is left out; one replaced keeps the
        # score of the text it had (the next search rebuilds: the version moved)
        return [MemoryHit(items[k], score) for k, score in nearest if k in items]
