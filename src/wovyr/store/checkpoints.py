"""Checkpoint deltas: a large checkpoint is stored as a base and the changes written since.

A step changes one or two activities of an execution, and its checkpoint holds them all: a
workflow of 300 activities rewrote ~100 KB on every step, so a step cost grew with the
workflow. A store given a step's `CheckpointChanges` (what it changes of the checkpoint
stored at the step's expected seq: the top-level keys set and dropped, the activities set)
may write them, encoded, in place of the whole checkpoint (SQLite `checkpoint_parts`,
PostgreSQL `checkpoint_deltas`, one row per step, keyed by the seq it leads to). A reader
folds the deltas over the base in seq order (`merged`): the same dict, as a whole write
would have stored. Every write is checked against the execution's seq, so a delta always
lands on the state it was computed from.

When to write what (`Ledger.plan`), a choice of cost only, never of correctness:
- a checkpoint under `DELTA_FROM` bytes is written whole (an extra row costs more than it
  saves; on SQLite it stays in the executions row);
- a delta is written only on top of a base this store wrote itself at the step's expected
  seq (the ledger remembers, per execution, the seq, the base's bytes and the deltas'
  bytes since; a bounded LRU of `LEDGER_SIZE`), and only while the deltas' bytes stay
  within the base's and their count within `MAX_DELTAS`: then the next write is whole
  again (compaction). A read costs at most about twice the base, and a step writes about
  twice its delta, amortised, whatever the size of the workflow.
- after a restart, a claim by another worker or a write by another process (a signal
  through the server), the first step writes whole; so does the step that ends the
  execution (what is read from then on is one row).

A sealed checkpoint is never written as deltas (the sealing store drops the changes: a
delta would be plain text beside a sealed base).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any

from wovyr.store.codec import dumps
from wovyr.store.frozen import record
from wovyr.store.records import FINISHED, StepWrite

__all__ = ["DELTA_FROM", "LEDGER_SIZE", "MAX_DELTAS", "Ledger", "Plan", "merged"]

DELTA_FROM = 3000  # size of a whole checkpoint (characters of its JSON) kept as base + deltas
MAX_DELTAS = 128  # deltas on one base at most (bounds the rows a read folds)
LEDGER_SIZE = 4096  # executions whose last write a store remembers


def merged(base: Mapping[str, Any], deltas: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """`base` with `deltas` (the encoded `CheckpointChanges`, oldest first) folded in."""
    out = dict(base)
    activities: dict[str, Any] | None = None
    for delta in deltas:
        out.update(delta.get("set") or {})
        for key in delta.get("drop") or ():
            out.pop(key, None)
        changed = delta.get("activities")
        if changed:
            if activities is None:
                activities = dict(out.get("activities") or {})
            activities.update(changed)
    if activities is not None:
        out["activities"] = activities
    return out


@record
class _Written:
    """What a store wrote for one execution, as of `seq`."""

    seq: int
    base: int  # bytes of the whole checkpoint last written
    deltas: int  # bytes of the deltas written on it since
    count: int  # how many


@record
class Plan:
    """How one step's checkpoint is written: `delta` (the encoded changes) or `whole` (the
    encoded checkpoint), exactly one of them set; `prior`: the bytes of the base stored at
    the step's expected seq when this store wrote it, else None (unknown)."""

    whole: str | None
    delta: str | None
    prior: int | None

    @property
    def parts_stored(self) -> bool:
        """Whether a base or deltas may lie outside the executions row (SQLite)."""
        return self.prior is None or self.prior >= DELTA_FROM


class Ledger:
    """Per execution, what this store last wrote of its checkpoint (bounded, thread-safe)."""

    def __init__(self, size: int = LEDGER_SIZE) -> None:
        self._size = size
        self._entries: OrderedDict[tuple[str, str], _Written] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def plan(self, step: StepWrite) -> Plan:
        key = step.key
        with self._lock:
            written = self._entries.get(key)
        if written is not None and written.seq != step.expected_seq:
            written = None
        if (
            written is not None
            and step.changes is not None
            and step.events  # a delta row is keyed by the seq it leads to
            and step.status not in FINISHED  # an ended execution keeps one base
            and written.base >= DELTA_FROM
            and written.count < MAX_DELTAS
        ):
            delta = dumps(step.changes.as_json())
            if written.deltas + len(delta) <= written.base:
                return Plan(None, delta, written.base)
        return Plan(dumps(step.checkpoint), None, written.base if written else None)

    def wrote(self, step: StepWrite, plan: Plan) -> None:
        """`step` applied as `plan` says (called in its transaction; a transaction that then
        fails leaves an entry whose seq no later step expects)."""
        key = step.key
        if step.changes is None or step.status in FINISHED:
            # (sealed or not known to be plain: nothing to build on; ended: no more steps)
            self.forget(key)
            return
        seq = step.expected_seq + len(step.events)
        if plan.whole is not None:
            entry = _Written(seq, len(plan.whole), 0, 0)
        else:
            with self._lock:
                before = self._entries.get(key)
            if before is None:
                return
            assert plan.delta is not None
            entry = _Written(seq, before.base, before.deltas + len(plan.delta), before.count + 1)
        self._remember(key, entry)

    def created(self, tenant: str, execution_id: str, seq: int, size: int, plain: bool) -> None:
        """A new execution written whole, `size` long (`plain`: not sealed)."""
        if plain:
            self._remember((tenant, execution_id), _Written(seq, size, 0, 0))

    def _remember(self, key: tuple[str, str], entry: _Written) -> None:
        with self._lock:
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)

    def forget(self, key: tuple[str, str]) -> None:
        with self._lock:
            self._entries.pop(key, None)
