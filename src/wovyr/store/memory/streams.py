"""The stream journal of the memory store (mixed into MemoryStore)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import datetime

from wovyr.store.records import ExecutionKey, ExecutionRecord
from wovyr.store.streams import NewChunk, StreamChunk

__all__ = ["MemoryStreams"]


class MemoryStreams:
    """Needs `_lock`, `_executions` and `_streams` from MemoryStore."""

    _lock: threading.RLock
    _executions: dict[ExecutionKey, ExecutionRecord]
    _streams: dict[ExecutionKey, list[StreamChunk]]

    def append_stream(
        self,
        tenant: str,
        execution_id: str,
        fence: int,
        chunks: Sequence[NewChunk],
        at: datetime,
    ) -> bool:
        key = (tenant, execution_id)
        with self._lock:
            record = self._executions.get(key)
            if record is None or record.fence != fence:
                return False
            journal = self._streams.setdefault(key, [])
            for chunk in chunks:
                journal.append(
                    StreamChunk(
                        len(journal) + 1,
                        chunk.activity,
                        chunk.attempt,
                        chunk.turn,
                        chunk.kind,
                        chunk.text,
                        at,
                        chunk.recovery,
                    )
                )
            return True

    def read_stream(
        self, tenant: str, execution_id: str, after: int = 0, limit: int = 500
    ) -> list[StreamChunk]:
        with self._lock:
            journal = self._streams.get((tenant, execution_id), [])
            return journal[max(after, 0) : max(after, 0) + limit]
