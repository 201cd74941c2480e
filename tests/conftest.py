"""Shared fixtures: every store the machine offers, a ManualClock, a fresh registry."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from wovyr.clock import ManualClock
from wovyr.engine.activities.base import ActivityRegistry
from wovyr.store.base import Store

if TYPE_CHECKING:
    from wovyr.engine.engine import Engine

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
STORE_KINDS = ["memory", "sqlite"]


def make_store(kind: str, tmp_path: Path) -> Store:
    if kind == "memory":
        from wovyr.store.memory import MemoryStore

        return MemoryStore()
    if kind == "sqlite":
        from wovyr.store.sqlite import SQLiteStore

        return SQLiteStore(tmp_path / "wovyr.db")
    raise ValueError(kind)


@pytest.fixture(params=STORE_KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    s = make_store(request.param, tmp_path)
    yield s
    s.close()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(datetime(2030, 1, 1, 9, 0, tzinfo=UTC))


@pytest.fixture
def registry() -> ActivityRegistry:
    return ActivityRegistry()


@pytest.fixture
def engine(store: Store, clock: ManualClock, registry: ActivityRegistry) -> Engine:
    from wovyr.engine.engine import Engine

    return Engine(store, clock=clock, activities=registry)
