"""The opt-in allocation tracing of `wovyr serve` and its worker process: nothing at all
unless asked; asked, SIGUSR2 writes a tracemalloc snapshot that can be loaded."""

from __future__ import annotations

import os
import signal
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from wovyr.errors import ConfigError
from wovyr.server.memtrace import ENV, FRAMES_ENV, install


@pytest.fixture
def restore() -> Iterator[None]:
    handler = signal.getsignal(signal.SIGUSR2)
    tracing = tracemalloc.is_tracing()
    yield
    signal.signal(signal.SIGUSR2, handler)
    if not tracing:
        tracemalloc.stop()


def test_without_the_variable_nothing_is_installed(restore: None) -> None:
    before = signal.getsignal(signal.SIGUSR2)
    assert install("server", {}) is None
    assert install("server", {ENV: ""}) is None
    assert signal.getsignal(signal.SIGUSR2) is before
    assert not tracemalloc.is_tracing()


def test_sigusr2_writes_a_snapshot_of_the_traced_allocations(tmp_path: Path, restore: None) -> None:
    where = install("worker", {ENV: str(tmp_path / "snaps"), FRAMES_ENV: "3"})
    assert where == tmp_path / "snaps"
    assert tracemalloc.is_tracing()
    assert tracemalloc.get_traceback_limit() == 3
    kept = [bytearray(1000) for _ in range(100)]  # something traced from this file
    os.kill(os.getpid(), signal.SIGUSR2)  # the handler runs before kill returns here
    path = where / f"worker-{os.getpid()}-1.snapshot"
    snapshot = tracemalloc.Snapshot.load(str(path))
    mine = snapshot.filter_traces([tracemalloc.Filter(True, __file__)])
    assert sum(t.size for t in mine.traces) >= 100_000
    assert len(kept) == 100


@pytest.mark.parametrize("frames", ["0", "many", "101"])
def test_a_bad_frame_count_is_refused_clearly(tmp_path: Path, frames: str, restore: None) -> None:
    with pytest.raises(ConfigError, match=FRAMES_ENV):
        install("server", {ENV: str(tmp_path), FRAMES_ENV: frames})
    assert not tracemalloc.is_tracing()
