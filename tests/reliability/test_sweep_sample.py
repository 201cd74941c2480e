"""The sample of a sweep's points a CI run tries (`tracing.Sample`), and the bisection that
finds the hand-overs between the points tried (`test_handover_crash.refine`)."""

from __future__ import annotations

import pytest

from .test_handover_crash import refine
from .tracing import SHARE, Sample

COUNTS = {"fdatasync": 17, "pwrite64": 192, "rename": 0, "write": 1}
EVERY = [(call, n) for call, count in COUNTS.items() for n in range(1, count + 1)]


def test_successive_seeds_try_every_point_and_each_the_core() -> None:
    tried: list[tuple[str, int]] = []
    for seed in range(41, 41 + SHARE):
        picked = Sample(seed, full=False).pick_calls(COUNTS)
        assert picked == sorted(picked, key=EVERY.index), "in sweep order"
        assert {("fdatasync", 1), ("fdatasync", 17), ("pwrite64", 1), ("pwrite64", 192)} <= set(
            picked
        )
        assert ("write", 1) in picked
        assert len(picked) <= len(EVERY) // SHARE + 2 * len(COUNTS), len(picked)
        tried += picked
    assert set(tried) == set(EVERY)
    assert Sample(7, full=True).pick_calls(COUNTS) == EVERY


def test_the_seed_and_the_full_sweep_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("WOVYR_SWEEP_SEED", "12")
    monkeypatch.delenv("WOVYR_FULL_SWEEP", raising=False)
    assert Sample.from_env() == Sample(12, full=False)
    assert "WOVYR_SWEEP_SEED=12" in Sample.from_env().line(70, 209)
    monkeypatch.setenv("WOVYR_FULL_SWEEP", "1")
    assert Sample.from_env() == Sample(12, full=True)


def test_bisection_finds_each_hand_over_between_two_consecutive_points() -> None:
    grows_at = [34, 56, 96, 142]  # the runs shown after a kill at point n
    tried: list[int] = []

    def runs_after_kill_at(n: int) -> int:
        tried.append(n)
        return sum(n >= g for g in grows_at)

    seen = {n: runs_after_kill_at(n) for n in range(1, 193, SHARE)}
    sampled = len(tried)
    assert refine(seen, runs_after_kill_at) == grows_at
    assert len(tried) - sampled <= 4 * 2, "a bisection per hand-over"
    for g in grows_at:
        assert {g - 1, g} <= set(seen)


def test_bisection_fails_on_runs_that_go_back_or_a_hand_over_in_one_step() -> None:
    with pytest.raises(AssertionError, match="went back"):
        refine({1: 0, 2: 2, 3: 1, 4: 4}, lambda n: 0)
    with pytest.raises(AssertionError):  # from 1 run to 3 at once: a hand-over not seen
        refine({1: 0, 2: 1, 3: 3, 4: 4}, lambda n: 0)
