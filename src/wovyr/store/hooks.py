"""Commit hooks: what a store tells its observers after a write has committed.

Metrics (and anything else that counts what happened) register a `StoreObserver` with
`store.add_observer(observer)` instead of wrapping the store. Every store calls its
observers at the same fixed points, after the transaction committed and outside the
store's locks:

- `created(new)`: an execution was inserted (by `create_execution`, or by a schedule fire:
  `update_schedule(..., starts)`, or by a committed step that continues as new:
  `step.continued_as`), once per execution actually inserted; a start whose id
  existed is not reported. Its first step (`new.first_step`) is part of it: it is not
  reported again through `committed`.
- `committed(steps, outcomes)`: a `commit` batch (or, on PostgreSQL, a `fire_timers`
  transaction) ended; `outcomes[i]` is the outcome of `steps[i]`, refused ones included.
- `claimed(claims)`: a `claim` leased these executions (never called with none).

An observer runs on the thread that wrote, so it must be quick and thread-safe. What it
raises is logged and otherwise ignored: the write has committed, and an observer can
neither fail nor undo it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Protocol

from wovyr.store.records import Claim, CommitOutcome, NewExecution, StepWrite

__all__ = ["Observers", "StoreObserver"]

log = logging.getLogger("wovyr.store")


class StoreObserver(Protocol):
    def created(self, new: NewExecution) -> None: ...

    def committed(self, steps: Sequence[StepWrite], outcomes: Sequence[CommitOutcome]) -> None: ...

    def claimed(self, claims: Sequence[Claim]) -> None: ...


class Observers:
    """The observer list of one store (each store holds one and calls it after its writes).

    It is itself a `StoreObserver` that tells every registered observer in turn. With none
    registered (the usual case outside a server) a call costs one truth test.
    """

    __slots__ = ("_add_lock", "_observers")

    def __init__(self) -> None:
        self._observers: tuple[StoreObserver, ...] = ()  # replaced, never mutated: no lock to read
        self._add_lock = threading.Lock()

    def add(self, observer: StoreObserver) -> None:
        with self._add_lock:
            self._observers = (*self._observers, observer)

    def __bool__(self) -> bool:
        return bool(self._observers)

    def created(self, new: NewExecution) -> None:
        for observer in self._observers:
            try:
                observer.created(new)
            except Exception:
                log.exception("store observer %r failed on a created execution", observer)

    def committed(self, steps: Sequence[StepWrite], outcomes: Sequence[CommitOutcome]) -> None:
        if not steps:
            return
        for observer in self._observers:
            try:
                observer.committed(steps, outcomes)
            except Exception:
                log.exception("store observer %r failed on a commit", observer)
        for step, outcome in zip(steps, outcomes, strict=False):
            if step.continued_as is not None and outcome is CommitOutcome.OK:
                self.created(step.continued_as)  # the chain's next run, inserted with it

    def claimed(self, claims: Sequence[Claim]) -> None:
        if not claims:
            return
        for observer in self._observers:
            try:
                observer.claimed(claims)
            except Exception:
                log.exception("store observer %r failed on a claim", observer)
