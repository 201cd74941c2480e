"""The in-memory store: the whole contract in dicts, for tests and embedding."""

from wovyr.store.memory.store import MemoryStore

__all__ = ["MemoryStore"]
