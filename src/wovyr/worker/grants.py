"""What a runner holds of flow control between the step that granted it and the commit
that records the attempts' results: the concurrency slots its running attempts hold, and
the rate-limit units granted to attempts not launched yet (taken again when they grew
stale, so calls granted apart do not run together)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

from wovyr.engine.core.decide import RunActivity
from wovyr.engine.flow import MAX_GRANT_AGE, FlowAsk
from wovyr.store.flow import FlowAnswer, RateRequest

__all__ = ["Grants"]


@dataclass
class Grants:
    """One runner's slots and granted units (`ExecutionRunner`)."""

    # activity concurrency slots held by running attempts: RunActivity.key -> (key, holder)
    slots: dict[str, tuple[str, str]] = field(default_factory=dict)
    # rate-limit units granted to attempts not launched yet: RunActivity.key ->
    # (when, by the monotonic clock, the requests)
    granted: dict[str, tuple[float, list[RateRequest]]] = field(default_factory=dict)

    def released(self, runs: Iterable[RunActivity]) -> list[tuple[str, str]]:
        """The slots of these attempts (whose results a step records)."""
        return [self.slots[r.key] for r in runs if r.key in self.slots]

    def recorded(self, runs: Iterable[RunActivity]) -> None:
        """The step recording these attempts' results was written: their slots are free."""
        for run in runs:
            self.slots.pop(run.key, None)

    def granted_now(self, gate: FlowAsk, runs: list[RunActivity]) -> None:
        """The step carrying `gate` was written: its attempts hold their slots (released by
        the commit recording their results) and their units (fresh until MAX_GRANT_AGE)."""
        self.slots.update(gate.holds)
        at = time.monotonic()
        for run in runs:
            rates = gate.rates_of.get(run.key)
            if rates:
                self.granted[run.key] = (at, rates)

    async def fresh_units(
        self,
        run: RunActivity,
        acquire: Callable[[list[RateRequest]], Awaitable[FlowAnswer]],
    ) -> None:
        """A call must follow the units it took closely, or calls granted apart could run
        together (a slow commit in between): units older than `MAX_GRANT_AGE` are taken
        again (`acquire`), waiting here for them if the bucket is short (rare: the grant
        was late)."""
        granted = self.granted.pop(run.key, None)
        if granted is None or time.monotonic() - granted[0] <= MAX_GRANT_AGE:
            return
        while True:
            answer = await acquire(granted[1])
            if answer.granted:
                return
            await asyncio.sleep(min(answer.wait, 5.0))
