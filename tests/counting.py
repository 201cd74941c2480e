"""Bounding work in tests by counting it, never by timing it.

Machines here differ 3x from day to day, and a busy machine or a tracer (coverage) slows a
test further, so a test that asserts a duration fails for no reason now and then. A count of
function calls does not move with the machine: `counting_calls` counts every call (Python
functions and built-ins called from Python) made on this thread while its block runs. Work
inside a C extension (libyaml, the CEL runtime) is one call however long it takes; bound that
work by the sizes the code checks (bytes, nodes, cost) instead. Timings live in `bench/`.
"""

from __future__ import annotations

import cProfile
import pstats
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass
class Calls:
    """How many function calls a `counting_calls` block made (set when the block ends)."""

    total: int = 0


@contextmanager
def counting_calls() -> Iterator[Calls]:
    """Count the function calls made on this thread inside the block, even if it raises."""
    calls = Calls()
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        yield calls
    finally:
        profiler.disable()
        calls.total = pstats.Stats(profiler).total_calls  # type: ignore[attr-defined]
