"""The overlap policy as a pure function: which ticks start, wait, are skipped or cancel."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from wovyr.scheduling.overlap import MAX_BUFFER, OverlapPlan, plan_overlap

T0 = datetime(2030, 1, 1, tzinfo=UTC)
TICKS = [T0 + timedelta(minutes=i) for i in range(3)]


def ident(tick: datetime) -> str:
    return f"s-{tick:%H%M}"


@pytest.mark.parametrize(
    ("policy", "running", "start", "cancel", "buffered", "skipped"),
    [
        # Nothing runs: every policy starts the first tick; later ones meet it running.
        ("skip", [], TICKS[:1], [], [], 2),
        ("allow_all", [], TICKS, [], [], 0),
        ("buffer_one", [], TICKS[:1], [], [TICKS[1].isoformat()], 1),
        ("buffer_all", [], TICKS[:1], [], [t.isoformat() for t in TICKS[1:]], 0),
        # cancel_other: each tick supersedes the one before; only the last starts.
        ("cancel_other", [], TICKS[2:], [], [], 2),
        # One of ours still runs.
        ("skip", ["old"], [], [], [], 3),
        ("buffer_one", ["old"], [], [], [TICKS[0].isoformat()], 2),
        ("cancel_other", ["old"], TICKS[2:], ["old"], [], 2),
        ("allow_all", ["old"], TICKS, [], [], 0),
    ],
)
def test_policies(
    policy: str,
    running: list[str],
    start: list[datetime],
    cancel: list[str],
    buffered: list[str],
    skipped: int,
) -> None:
    plan = plan_overlap(policy, TICKS, running, ident)
    assert plan == OverlapPlan(tuple(start), tuple(cancel), tuple(buffered), skipped)
    # Every tick is accounted for exactly once.
    assert len(plan.start) + len(plan.buffered) + plan.skipped == len(TICKS)


def test_budget_limits_starts_and_counts_the_rest_as_skipped() -> None:
    plan = plan_overlap("allow_all", TICKS, [], ident, budget=2)
    assert plan.start == tuple(TICKS[:2]) and plan.skipped == 1
    assert plan_overlap("allow_all", TICKS, [], ident, budget=0).start == ()


def test_buffer_all_is_bounded() -> None:
    ticks = [T0 + timedelta(seconds=i) for i in range(MAX_BUFFER + 5)]
    plan = plan_overlap("buffer_all", ticks, ["old"], lambda t: t.isoformat())
    assert len(plan.buffered) == MAX_BUFFER and plan.skipped == 5 and plan.start == ()
