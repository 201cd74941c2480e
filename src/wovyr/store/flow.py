"""Flow control in the store: the slots of concurrency keys (`SlotRequest`, taken when an
execution starts, `SlotRelease`, given back by the step that ends it). The writes ride on
`create_execution` and `commit`; this role only reads who holds and who waits."""

from __future__ import annotations

from typing import Protocol

from wovyr.store.records import SlotState

__all__ = ["FlowStore"]


class FlowStore(Protocol):
    def slot_state(self, tenant: str, key: str) -> SlotState:
        """The holders of `key`'s slots in `tenant` and the executions waiting for one, each
        in start order (empty lists for a key nobody uses)."""
        ...
