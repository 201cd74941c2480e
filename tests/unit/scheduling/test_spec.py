"""Schedule specs: cron matching, DST rules, intervals, catch-up, and input errors.

Expected instants are written out in UTC. The 2026 transitions used below:
America/New_York springs forward 2026-03-08 07:00Z (02:00 EST -> 03:00 EDT) and falls back
2026-11-01 06:00Z (02:00 EDT -> 01:00 EST); Europe/Berlin springs forward 2026-03-29 01:00Z
(02:00 CET -> 03:00 CEST) and falls back 2026-10-25 01:00Z (03:00 CEST -> 02:00 CET).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from itertools import pairwise
from zoneinfo import ZoneInfo

import pytest
from cronsim import CronSim
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from wovyr.errors import CalendarRangeError, WovyrError
from wovyr.scheduling import spec as spec_module
from wovyr.scheduling.spec import CatchUp, CronSpec, IntervalSpec, catch_up, parse_spec

NEW_YORK = "America/New_York"
BERLIN = "Europe/Berlin"


def utc(text: str) -> datetime:
    """'2026-03-08 07:00' (or with seconds) as an aware UTC datetime."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def ticks(expression: str, start: str, count: int, timezone: str = "UTC") -> list[datetime]:
    return CronSpec(expression, timezone).ticks_between(utc(start), utc("2100-01-01"), count)


def test_all_is_sorted_and_complete() -> None:
    assert spec_module.__all__ == sorted(spec_module.__all__)
    for name in spec_module.__all__:
        assert hasattr(spec_module, name)


# --- cron matching -------------------------------------------------------------------------


def test_day_of_month_and_day_of_week_both_restricted_match_either() -> None:
    # 2026-01-01 is a Thursday; the 13th is a Tuesday.
    assert ticks("0 0 13 * FRI", "2026-01-01", 5) == [
        utc("2026-01-02"),
        utc("2026-01-09"),
        utc("2026-01-13"),
        utc("2026-01-16"),
        utc("2026-01-23"),
    ]


def test_a_star_day_field_means_the_other_must_match() -> None:
    assert ticks("0 0 * * FRI", "2026-01-01", 2) == [utc("2026-01-02"), utc("2026-01-09")]
    assert ticks("0 0 13 * *", "2026-01-01", 2) == [utc("2026-01-13"), utc("2026-02-13")]


def test_a_day_field_starting_with_star_counts_as_unrestricted_as_in_vixie() -> None:
    # `*/2` starts with `*`, so both day fields must match: odd-numbered Mondays only.
    assert ticks("0 0 */2 * MON", "2026-01-01", 4) == [
        utc("2026-01-05"),
        utc("2026-01-19"),
        utc("2026-02-09"),
        utc("2026-02-23"),
    ]


def test_every_fifteen_minutes() -> None:
    assert ticks("*/15 * * * *", "2026-05-05 10:07", 4) == [
        utc("2026-05-05 10:15"),
        utc("2026-05-05 10:30"),
        utc("2026-05-05 10:45"),
        utc("2026-05-05 11:00"),
    ]


@pytest.mark.parametrize(
    ("expression", "start", "expected"),
    [
        ("0 9-11 * * *", "2026-05-05", ["05 09:00", "05 10:00", "05 11:00", "06 09:00"]),
        ("5,35 * * * *", "2026-05-05", ["05 00:05", "05 00:35", "05 01:05", "05 01:35"]),
        ("10-50/10 8 * * *", "2026-05-05", ["05 08:10", "05 08:20", "05 08:30", "05 08:40"]),
        ("0 12 * * MON-FRI", "2026-05-08", ["08 12:00", "11 12:00", "12 12:00", "13 12:00"]),
        ("0 12 * * mon,wed", "2026-05-05", ["06 12:00", "11 12:00", "13 12:00", "18 12:00"]),
        ("0 0 * * 7", "2026-05-05", ["10 00:00", "17 00:00", "24 00:00", "31 00:00"]),
        ("0 0 * * 0", "2026-05-05", ["10 00:00", "17 00:00", "24 00:00", "31 00:00"]),
        ("0 0 * * SUN", "2026-05-05", ["10 00:00", "17 00:00", "24 00:00", "31 00:00"]),
        ("0 0 * * 5-7", "2026-05-05", ["08 00:00", "09 00:00", "10 00:00", "15 00:00"]),
        ("0 6 1,15 * *", "2026-05-05", ["15 06:00"]),
    ],
)
def test_ranges_lists_steps_and_names(expression: str, start: str, expected: list[str]) -> None:
    got = ticks(expression, start, len(expected))
    assert got == [utc(f"2026-05-{day}") for day in expected]


def test_month_names_and_lists() -> None:
    assert ticks("0 0 1 JAN,jul *", "2026-02-01", 3) == [
        utc("2026-07-01"),
        utc("2027-01-01"),
        utc("2027-07-01"),
    ]


def test_february_29_waits_for_the_next_leap_year() -> None:
    spec = CronSpec("0 0 29 2 *")
    assert spec.next_after(utc("2027-03-01")) == utc("2028-02-29")
    assert spec.next_after(utc("2028-02-29")) == utc("2032-02-29")


def test_day_31_skips_thirty_day_months_and_february() -> None:
    assert ticks("0 0 31 * *", "2026-01-01", 7) == [
        utc("2026-01-31"),
        utc("2026-03-31"),
        utc("2026-05-31"),
        utc("2026-07-31"),
        utc("2026-08-31"),
        utc("2026-10-31"),
        utc("2026-12-31"),
    ]


@pytest.mark.parametrize(
    ("macro", "expansion"),
    [
        ("@hourly", "0 * * * *"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@weekly", "0 0 * * 0"),
        ("@monthly", "0 0 1 * *"),
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
        ("@DAILY", "0 0 * * *"),
    ],
)
def test_macros_mean_their_five_field_forms(macro: str, expansion: str) -> None:
    start, end = utc("2026-01-01"), utc("2028-01-01")
    assert CronSpec(macro).ticks_between(start, end, 50) == CronSpec(expansion).ticks_between(
        start, end, 50
    )


def test_next_after_is_strictly_after_and_ticks_between_bounds() -> None:
    spec = CronSpec("0 * * * *")
    assert spec.next_after(utc("2026-05-05 10:00")) == utc("2026-05-05 11:00")
    assert spec.next_after(utc("2026-05-05 09:59:59.999999")) == utc("2026-05-05 10:00")
    # start exclusive, end inclusive
    assert spec.ticks_between(utc("2026-05-05 10:00"), utc("2026-05-05 12:00")) == [
        utc("2026-05-05 11:00"),
        utc("2026-05-05 12:00"),
    ]
    assert spec.ticks_between(utc("2026-05-05 10:00"), utc("2026-05-05 10:00")) == []
    assert spec.ticks_between(utc("2026-05-05"), utc("2026-05-06"), limit=0) == []


def test_results_are_utc_whatever_zone_the_input_uses() -> None:
    after = datetime(2026, 5, 5, 9, 0, tzinfo=ZoneInfo(BERLIN))
    tick = CronSpec("0 9 * * *", BERLIN).next_after(after)
    assert tick == utc("2026-05-06 07:00")
    assert tick.tzinfo is UTC


def test_describe() -> None:
    assert CronSpec("0 9 * * 1-5", BERLIN).describe() == (
        "At 09:00 on Monday through Friday (Europe/Berlin)"
    )
    assert IntervalSpec(900).describe() == "every 15m (UTC-anchored)"
    assert IntervalSpec(3600, 300).describe() == "every 1h, offset 5m (UTC-anchored)"
    assert IntervalSpec(0.5).describe() == "every 0.5s (UTC-anchored)"


def test_expression_whitespace_is_normalised_and_equality_is_by_value() -> None:
    assert CronSpec("  0  9 * *\t1-5 ", BERLIN) == CronSpec("0 9 * * 1-5", BERLIN)
    assert CronSpec("  0  9 * *\t1-5 ").expression == "0 9 * * 1-5"
    assert hash(CronSpec("@daily")) == hash(CronSpec("@daily"))


@pytest.mark.parametrize(
    ("expression", "start", "expected"),
    [
        # Vixie cron: a stepped range whose ends are equal is that one value (cronsim alone
        # reads `9-9/3` as 9-23/3, and `5-5/1` as Friday through Sunday).
        ("0 9-9/3 * * *", "2026-05-05", ["05 09:00", "06 09:00", "07 09:00"]),
        ("0 0 * * 5-5/1", "2026-05-05", ["08 00:00", "15 00:00", "22 00:00"]),
        ("0 0 * * fri-FRI/2", "2026-05-05", ["08 00:00", "15 00:00", "22 00:00"]),
        ("30-30/7 9 * * *", "2026-05-05", ["05 09:30", "06 09:30", "07 09:30"]),
        ("0 0 13-13/5 * *", "2026-05-05", ["13 00:00"]),
        ("0 1,9-9/3 * * *", "2026-05-05", ["05 01:00", "05 09:00", "06 01:00", "06 09:00"]),
    ],
)
def test_a_stepped_range_with_equal_ends_is_that_one_value(
    expression: str, start: str, expected: list[str]
) -> None:
    got = ticks(expression, start, len(expected))
    assert got == [utc(f"2026-05-{day}") for day in expected]


def test_a_stepped_range_with_equal_ends_in_months_is_that_one_month() -> None:
    assert ticks("0 0 1 feb-2/3 *", "2026-01-01", 2) == [utc("2026-02-01"), utc("2027-02-01")]


@pytest.mark.parametrize(
    ("expression", "described", "first_ticks"),
    [
        ("0 9-9/3 * * *", "At 09:00 every day (UTC)", ["05 09:00", "06 09:00"]),
        ("0 0 * * 5-5/1", "At 00:00 on Friday (UTC)", ["08 00:00", "15 00:00"]),
        ("0 1,9-9/3 * * *", "At 01:00 and 09:00 every day (UTC)", ["05 01:00", "05 09:00"]),
    ],
)
def test_describe_agrees_with_the_ticks_of_an_equal_ended_stepped_range(
    expression: str, described: str, first_ticks: list[str]
) -> None:
    spec = CronSpec(expression)
    assert spec.describe() == described
    assert spec.ticks_between(utc("2026-05-05"), utc("2026-05-16"), 2) == [
        utc(f"2026-05-{day}") for day in first_ticks
    ]
    assert spec.expression == expression  # the text as written is what is stored and shown


# --- the ends of the calendar ----------------------------------------------------------------

LAST_INSTANT = datetime.max.replace(tzinfo=UTC)
FIRST_INSTANT = datetime.min.replace(tzinfo=UTC)


@pytest.mark.parametrize(
    ("spec", "after"),
    [
        (CronSpec("0 0 * * *"), utc("9999-12-31 12:00")),
        (CronSpec("0 0 * * *", "Asia/Tokyo"), utc("9999-12-31 12:00")),  # local year 10000
        (CronSpec("0 23 * * *", NEW_YORK), utc("9999-12-31 12:00")),  # instant in year 10000
        (CronSpec("0 0 1 1 *", "Pacific/Kiritimati"), utc("9999-01-01")),
        (CronSpec("0 0 29 2 *"), utc("9997-03-01")),  # the next leap day is in 10000
        (CronSpec("* * * * *"), LAST_INSTANT),
        (IntervalSpec(60), LAST_INSTANT),
        (IntervalSpec(86400 * 365), utc("9999-09-01")),  # ticks on 9999-09-01, then 10000
    ],
)
def test_next_after_near_the_end_of_the_calendar_says_so(
    spec: CronSpec | IntervalSpec, after: datetime
) -> None:
    with pytest.raises(CalendarRangeError, match="after the end of the calendar") as caught:
        spec.next_after(after)
    assert isinstance(caught.value, WovyrError)
    assert isinstance(caught.value, ValueError)  # callers that catch ValueError still do
    assert spec.describe() in str(caught.value)


def test_times_that_cannot_be_placed_in_the_calendar_are_refused_clearly() -> None:
    with pytest.raises(CalendarRangeError, match="before the start of the calendar"):
        CronSpec("0 0 * * *", NEW_YORK).next_after(FIRST_INSTANT)  # 0000-12-31 in New York
    with pytest.raises(CalendarRangeError, match="outside the calendar"):
        CronSpec("0 0 * * *").next_after(  # 10000-01-01 04:00 in UTC
            datetime(9999, 12, 31, 23, tzinfo=timezone(timedelta(hours=-5)))
        )


def test_ticks_between_ends_with_the_calendar() -> None:
    start = LAST_INSTANT - timedelta(minutes=3)
    last_three = [utc("9999-12-31 23:57"), utc("9999-12-31 23:58"), utc("9999-12-31 23:59")]
    assert CronSpec("* * * * *", NEW_YORK).ticks_between(start, LAST_INSTANT) == last_three
    # A cron tick needs its wall time in the calendar too: Tokyo's end at 23:59 local.
    tokyo = CronSpec("* * * * *", "Asia/Tokyo")
    assert tokyo.ticks_between(utc("9999-12-31 14:57"), LAST_INSTANT) == [
        utc("9999-12-31 14:58"),
        utc("9999-12-31 14:59"),
    ]
    assert IntervalSpec(60).ticks_between(start, LAST_INSTANT) == last_three
    assert CronSpec("0 0 * * *", NEW_YORK).ticks_between(start, LAST_INSTANT) == []


def test_catch_up_at_the_end_of_the_calendar_says_so() -> None:
    with pytest.raises(CalendarRangeError, match="after the end of the calendar"):
        catch_up(CronSpec("0 * * * *", "Asia/Tokyo"), utc("9999-12-31"), LAST_INSTANT, 86400)


EXTREME_ZONES = ["UTC", "Asia/Tokyo", "Pacific/Kiritimati", NEW_YORK, "Etc/GMT+12"]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(
    st.one_of(
        st.datetimes(min_value=datetime(9990, 1, 1)),
        st.datetimes(max_value=datetime(1, 1, 3)),
    ).map(lambda d: d.replace(tzinfo=UTC)),
    st.sampled_from(EXTREME_ZONES),
    st.sampled_from(["* * * * *", "0 0 * * *", "30 23 31 12 *", "0 0 29 2 *", "0 12 * * MON"]),
)
def test_near_either_end_a_tick_follows_or_the_error_says_why(
    after: datetime, zone: str, expression: str
) -> None:
    spec = CronSpec(expression, zone)
    found: list[datetime] | str
    try:
        found = [spec.next_after(after)]
        assert spec.ticks_between(after, LAST_INSTANT, limit=1) == found
    except CalendarRangeError as exc:  # anything else (OverflowError) fails the test
        found = str(exc)
    if isinstance(found, str):
        assert "calendar" in found
    else:
        assert found[0] > after


# --- daylight saving -------------------------------------------------------------------------


def test_new_york_spring_forward_gap_tick_runs_once_at_three() -> None:
    assert ticks("30 2 * * *", "2026-03-07", 3, NEW_YORK) == [
        utc("2026-03-07 07:30"),  # 02:30 EST
        utc("2026-03-08 07:00"),  # 02:30 does not exist: 03:00 EDT
        utc("2026-03-09 06:30"),  # 02:30 EDT
    ]


def test_new_york_spring_forward_collapses_all_gap_ticks_into_one() -> None:
    assert ticks("*/15 2,3 * * *", "2026-03-08", 4, NEW_YORK) == [
        utc("2026-03-08 07:00"),  # 02:00, 02:15, 02:30, 02:45 and 03:00 itself
        utc("2026-03-08 07:15"),
        utc("2026-03-08 07:30"),
        utc("2026-03-08 07:45"),
    ]


def test_new_york_spring_forward_wildcard_hour() -> None:
    assert ticks("30 * * * *", "2026-03-08 05:00", 4, NEW_YORK) == [
        utc("2026-03-08 05:30"),  # 00:30 EST
        utc("2026-03-08 06:30"),  # 01:30 EST
        utc("2026-03-08 07:00"),  # 02:30 skipped: 03:00 EDT
        utc("2026-03-08 07:30"),  # 03:30 EDT
    ]


def test_new_york_fall_back_overlap_tick_runs_once_at_the_first_occurrence() -> None:
    assert ticks("30 1 * * *", "2026-10-31 12:00", 3, NEW_YORK) == [
        utc("2026-11-01 05:30"),  # 01:30 EDT; 01:30 EST (06:30Z) does not fire
        utc("2026-11-02 06:30"),  # 01:30 EST
        utc("2026-11-03 06:30"),
    ]


def test_new_york_fall_back_wildcard_hour_fires_once_per_wall_clock_time() -> None:
    assert ticks("30 * * * *", "2026-11-01 04:00", 4, NEW_YORK) == [
        utc("2026-11-01 04:30"),  # 00:30 EDT
        utc("2026-11-01 05:30"),  # 01:30 EDT
        utc("2026-11-01 07:30"),  # 02:30 EST; the second 01:30 (06:30Z) is not a new time
        utc("2026-11-01 08:30"),  # 03:30 EST
    ]


def test_start_in_the_second_pass_of_an_overlap_never_returns_an_earlier_time() -> None:
    spec = CronSpec("30 1 * * *", NEW_YORK)
    assert spec.next_after(utc("2026-11-01 06:00")) == utc("2026-11-02 06:30")
    assert spec.next_after(utc("2026-11-01 05:30")) == utc("2026-11-02 06:30")
    hourly = CronSpec("*/20 * * * *", NEW_YORK)
    # 01:10 EST: 01:20 and 01:40 already happened as EDT times, so 02:00 EST is next
    assert hourly.next_after(utc("2026-11-01 06:10")) == utc("2026-11-01 07:00")


def test_berlin_spring_forward() -> None:
    assert ticks("30 2 * * *", "2026-03-28", 3, BERLIN) == [
        utc("2026-03-28 01:30"),  # 02:30 CET
        utc("2026-03-29 01:00"),  # 02:30 does not exist: 03:00 CEST
        utc("2026-03-30 00:30"),  # 02:30 CEST
    ]


def test_berlin_fall_back() -> None:
    assert ticks("30 2 * * *", "2026-10-24", 3, BERLIN) == [
        utc("2026-10-24 00:30"),  # 02:30 CEST
        utc("2026-10-25 00:30"),  # first 02:30 (CEST); the CET one at 01:30Z does not fire
        utc("2026-10-26 01:30"),  # 02:30 CET
    ]
    assert ticks("0 * * * *", "2026-10-24 23:30", 4, BERLIN) == [
        utc("2026-10-25 00:00"),  # 02:00 CEST
        utc("2026-10-25 02:00"),  # 03:00 CET; 02:00 CET (01:00Z) is the same wall time again
        utc("2026-10-25 03:00"),
        utc("2026-10-25 04:00"),
    ]


def test_berlin_weekday_morning_keeps_its_wall_clock_time_across_the_change() -> None:
    assert ticks("0 9 * * MON-FRI", "2026-03-27", 2, BERLIN) == [
        utc("2026-03-27 08:00"),  # Friday 09:00 CET
        utc("2026-03-30 07:00"),  # Monday 09:00 CEST
    ]


def test_whole_skipped_day_and_midnight_gaps() -> None:
    # Samoa skipped 2011-12-30 entirely; Sao Paulo's 2018 spring-forward skipped midnight.
    assert ticks("0 9 * * *", "2011-12-29 20:00", 2, "Pacific/Apia") == [
        utc("2011-12-30 10:00"),  # the 30th's 09:00 never happened: 00:00 on the 31st
        utc("2011-12-30 19:00"),  # 09:00 +14:00 on the 31st
    ]
    assert ticks("0 0 * * *", "2018-11-03 12:00", 1, "America/Sao_Paulo") == [
        utc("2018-11-04 03:00"),  # 00:00 -> 01:00 -02:00
    ]
    # Nuuk's 2026 spring-forward skips 23:00-24:00 on 03-28: the gap ends at midnight
    assert ticks("30 23 * * *", "2026-03-28 12:00", 2, "America/Nuuk") == [
        utc("2026-03-29 01:00"),  # 00:00 -01:00 on the 29th
        utc("2026-03-30 00:30"),  # 23:30 -01:00 on the 29th
    ]
    result = catch_up(
        CronSpec("30 23 * * *", "America/Nuuk"), utc("2026-03-20"), utc("2026-04-10"), 0
    )
    assert result.skipped == 21


def test_cronsim_native_dst_handling_differs_which_is_why_this_module_wraps_it() -> None:
    """If one of these starts failing, cronsim changed: recheck the wrapper in spec.py."""
    ny = ZoneInfo(NEW_YORK)

    def native(expression: str, start: datetime, count: int) -> list[datetime]:
        found = CronSim(expression, start.astimezone(ny))
        return [next(found).astimezone(UTC) for _ in range(count)]

    # fires both 01:30s on fall-back day for a wildcard hour
    assert utc("2026-11-01 06:30") in native("30 * * * *", utc("2026-11-01 04:00"), 4)
    # drops the gap ticks of a wildcard-minute expression entirely (no run on 03-08)
    assert native("*/15 2 * * *", utc("2026-03-08"), 1) == [utc("2026-03-09 06:00")]
    # returns a time before the start when the start is in the second pass of an overlap
    assert native("30 1 * * *", utc("2026-11-01 06:00"), 1) == [utc("2026-11-01 05:30")]


# --- intervals -------------------------------------------------------------------------------


def test_interval_ticks_are_anchored_to_the_epoch() -> None:
    spec = IntervalSpec(900)
    assert spec.next_after(utc("2026-05-05 10:07:30")) == utc("2026-05-05 10:15")
    assert spec.next_after(utc("2026-05-05 10:15")) == utc("2026-05-05 10:30")
    assert IntervalSpec(86400, 9 * 3600).next_after(utc("2026-05-05 10:00")) == utc(
        "2026-05-06 09:00"
    )


def test_interval_with_offset() -> None:
    spec = IntervalSpec(900, offset=60)
    assert spec.next_after(utc("2026-05-05 10:07:30")) == utc("2026-05-05 10:16")
    assert spec.ticks_between(utc("2026-05-05 10:00"), utc("2026-05-05 11:01")) == [
        utc("2026-05-05 10:01"),
        utc("2026-05-05 10:16"),
        utc("2026-05-05 10:31"),
        utc("2026-05-05 10:46"),
        utc("2026-05-05 11:01"),
    ]
    assert spec.ticks_between(utc("2026-05-05 10:01"), utc("2026-05-05 10:31"), 1) == [
        utc("2026-05-05 10:16")
    ]


def test_interval_ticks_do_not_drift_and_do_not_depend_on_where_counting_starts() -> None:
    spec = IntervalSpec(0.1)
    tenths = spec.ticks_between(utc("2026-05-05 10:00"), utc("2026-05-05 10:00:01"))
    assert len(tenths) == 10
    assert tenths[-1] == utc("2026-05-05 10:00:01")
    seven = IntervalSpec(7)
    a = seven.ticks_between(utc("2026-05-05 10:00"), utc("2026-05-05 11:00"))
    b = seven.ticks_between(utc("2026-05-05 10:00:03"), utc("2026-05-05 11:00"))
    assert set(b) <= set(a)
    assert len(a) - len(b) <= 1


def test_intervals_ignore_local_time() -> None:
    spec = IntervalSpec(3600)
    assert spec.ticks_between(utc("2026-11-01 04:30"), utc("2026-11-01 07:30")) == [
        utc("2026-11-01 05:00"),
        utc("2026-11-01 06:00"),
        utc("2026-11-01 07:00"),
    ]


@pytest.mark.parametrize(
    ("every", "offset", "message"),
    [
        (0, 0, "greater than zero"),
        (-5, 0, "greater than zero"),
        (float("nan"), 0, "greater than zero"),
        (float("inf"), 0, "greater than zero"),
        (True, 0, "greater than zero"),
        (1e-9, 0, "at least 1 microsecond"),
        (1e12, 0, "cannot exceed 100 years"),
        (60, -1, "offset must be at least 0"),
        (60, 60, "less than every"),
        (60, 90, "less than every"),
    ],
)
def test_bad_intervals(every: float, offset: float, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        IntervalSpec(every, offset)


# --- catch-up --------------------------------------------------------------------------------


def test_catch_up_after_three_hours_down_with_a_one_hour_window() -> None:
    # Last fired at 09:00, down from 09:05 to 12:05: 09:15 .. 12:00 were missed (12 ticks).
    result = catch_up(
        CronSpec("*/15 * * * *"),
        last_tick_due=utc("2026-05-05 09:15"),
        now=utc("2026-05-05 12:05"),
        window_seconds=3600,
    )
    assert result == CatchUp(
        run=[
            utc("2026-05-05 11:15"),
            utc("2026-05-05 11:30"),
            utc("2026-05-05 11:45"),
            utc("2026-05-05 12:00"),
        ],
        skipped=8,
        next_fire_at=utc("2026-05-05 12:15"),
    )


def test_catch_up_window_start_is_inclusive() -> None:
    result = catch_up(
        CronSpec("*/15 * * * *"), utc("2026-05-05 09:15"), utc("2026-05-05 12:00"), 3600
    )
    assert result.run == [utc(f"2026-05-05 {t}") for t in ("11:00", "11:15", "11:30", "11:45")] + [
        utc("2026-05-05 12:00")
    ]
    assert result.skipped == 7  # 09:15 .. 10:45
    assert result.next_fire_at == utc("2026-05-05 12:15")


def test_catch_up_for_an_interval_after_three_hours_down() -> None:
    result = catch_up(IntervalSpec(600), utc("2026-05-05 09:10"), utc("2026-05-05 12:05"), 3600)
    assert result.run == [utc(f"2026-05-05 {t}") for t in ("11:10", "11:20", "11:30")] + [
        utc(f"2026-05-05 {t}") for t in ("11:40", "11:50", "12:00")
    ]
    assert result.skipped == 12  # 09:10 .. 11:00
    assert result.next_fire_at == utc("2026-05-05 12:10")


def test_catch_up_with_the_default_one_minute_window_runs_only_the_latest() -> None:
    result = catch_up(CronSpec("* * * * *"), utc("2026-05-05 09:00"), utc("2026-05-05 12:00"), 60)
    assert result.run == [utc("2026-05-05 11:59"), utc("2026-05-05 12:00")]
    assert result.skipped == 179
    assert result.next_fire_at == utc("2026-05-05 12:01")


def test_catch_up_limit_keeps_the_newest_ticks_and_counts_the_rest() -> None:
    result = catch_up(
        CronSpec("*/15 * * * *"), utc("2026-05-05 09:15"), utc("2026-05-05 12:05"), 3600, limit=2
    )
    assert result.run == [utc("2026-05-05 11:45"), utc("2026-05-05 12:00")]
    assert result.skipped == 10


def test_catch_up_when_nothing_is_due_yet() -> None:
    result = catch_up(CronSpec("0 * * * *"), utc("2026-05-05 13:00"), utc("2026-05-05 12:05"), 60)
    assert result == CatchUp(run=[], skipped=0, next_fire_at=utc("2026-05-05 13:00"))


def test_catch_up_on_time_runs_exactly_the_due_tick() -> None:
    result = catch_up(CronSpec("0 * * * *"), utc("2026-05-05 12:00"), utc("2026-05-05 12:00"), 0)
    assert result == CatchUp(
        run=[utc("2026-05-05 12:00")], skipped=0, next_fire_at=utc("2026-05-05 13:00")
    )


def test_catch_up_counts_only_real_ticks_from_an_off_grid_start() -> None:
    result = catch_up(
        CronSpec("*/15 * * * *"), utc("2026-05-05 09:20"), utc("2026-05-05 10:00"), 600
    )
    assert result.run == [utc("2026-05-05 10:00")]
    assert result.skipped == 2  # 09:30, 09:45


def test_catch_up_over_a_year_of_one_second_interval_is_arithmetic() -> None:
    result = catch_up(IntervalSpec(1), utc("2025-05-05"), utc("2026-05-05"), 60, limit=10)
    assert len(result.run) == 10
    assert result.run[-1] == utc("2026-05-05")
    assert result.skipped == 365 * 86400 + 1 - 10
    assert result.next_fire_at == utc("2026-05-05 00:00:01")


def test_catch_up_over_a_year_of_minutes_counts_exactly() -> None:
    # 2025-05-05 .. 2026-05-05 inclusive is 525,601 real minutes; Berlin's fall-back hour
    # (2025-10-26) repeats 60 wall times that do not fire again. Counting is by whole days.
    result = catch_up(
        CronSpec("* * * * *", BERLIN), utc("2025-05-05"), utc("2026-05-05"), 60, limit=10
    )
    assert result.run == [utc("2026-05-04 23:59"), utc("2026-05-05")]
    assert result.skipped == 525_601 - 60 - 2
    weekdays = catch_up(
        CronSpec("0 9 * * MON-FRI", BERLIN), utc("2026-01-01"), utc("2027-01-01"), 0
    )
    assert weekdays.skipped == 261  # weekdays in 2026


def test_catch_up_over_a_dst_change() -> None:
    # down across the New York fall-back night; the one 01:30 of that day is the one missed
    result = catch_up(
        CronSpec("30 * * * *", NEW_YORK), utc("2026-11-01 04:30"), utc("2026-11-01 08:00"), 3600
    )
    assert result.run == [utc("2026-11-01 07:30")]
    assert result.skipped == 2  # 04:30Z and 05:30Z, but not 06:30Z (the second 01:30)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"window_seconds": -1}, "cannot be negative"),
        ({"window_seconds": float("nan")}, "finite"),
        ({"limit": -1}, "limit"),
        ({"now": datetime(2026, 5, 5)}, "now must be a timezone-aware"),
        ({"last_tick_due": datetime(2026, 5, 5)}, "last_tick_due must be"),
    ],
)
def test_catch_up_refuses_bad_arguments(kwargs: dict[str, object], message: str) -> None:
    arguments: dict[str, object] = {
        "spec": CronSpec("@hourly"),
        "last_tick_due": utc("2026-05-05"),
        "now": utc("2026-05-05 01:00"),
        "window_seconds": 60,
    }
    arguments.update(kwargs)
    with pytest.raises(ValueError, match=message):
        catch_up(**arguments)  # type: ignore[arg-type]


# --- parsing user input and errors -----------------------------------------------------------


def test_parse_spec_builds_both_kinds() -> None:
    assert parse_spec("0 9 * * MON-FRI", None, BERLIN) == CronSpec("0 9 * * MON-FRI", BERLIN)
    assert parse_spec("@daily", None, None) == CronSpec("@daily", "UTC")
    assert parse_spec(None, "15m", None) == IntervalSpec(900.0)
    assert parse_spec(None, 30, "UTC", offset="10s") == IntervalSpec(30.0, 10.0)
    assert parse_spec(None, "PT1H", None, offset=300) == IntervalSpec(3600.0, 300.0)


@pytest.mark.parametrize(
    ("cron", "every", "timezone", "offset", "message"),
    [
        ("0 9 * * *", "15m", None, None, "either a cron expression or an interval"),
        (None, None, None, None, "needs a cron expression or an interval"),
        ("0 9 * * *", None, "Mars/Base", None, "unknown time zone 'Mars/Base'"),
        ("0 9 * * *", None, "europe/berlin", None, "unknown time zone"),
        ("0 9 * * *", None, "", None, "unknown time zone"),
        ("0 9 * * *", None, "America", None, "unknown time zone"),
        ("0 9 * * *", None, "../etc/passwd", None, "unknown time zone"),
        ("0 9 * * *", None, "localtime", None, "depends on the host"),
        ("0 9 * * *", None, None, "5m", "'offset' applies only to intervals"),
        (None, "0s", None, None, "greater than zero"),
        (None, 0, None, None, "greater than zero"),
        (None, "-5m", None, None, "every must be greater than zero, got '-5m'"),
        (None, -5, None, None, "every must be greater than zero"),
        (None, "soon", None, None, "every: invalid duration 'soon'"),
        (None, "1h", BERLIN, None, "applies only to cron expressions"),
        (None, "1h", None, "-5m", "offset cannot be negative"),
        (None, "1h", None, "1h", "less than every"),
    ],
)
def test_parse_spec_errors(
    cron: str | None,
    every: str | float | None,
    timezone: str | None,
    offset: str | float | None,
    message: str,
) -> None:
    with pytest.raises(ValueError, match=message):
        parse_spec(cron, every, timezone, offset)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("", "it is empty"),
        ("* * * *", "expected 5 fields .* got 4"),
        ("0 0 * * * *", "expected 5 fields .* got 6"),
        ("@reboot", "unknown macro"),
        ("61 * * * *", "bad minute field '61'; allowed 0-59"),
        ("*/0 * * * *", "bad minute field"),
        ("0 24 * * *", "bad hour field '24'"),
        ("0 0 0 * *", "bad day-of-month field '0'"),
        ("0 0 32 * *", "bad day-of-month field"),
        ("0 0 * 13 *", "bad month field '13'"),
        ("0 0 * FOO *", "bad month field 'FOO'"),
        ("0 0 * * 8", "bad day-of-week field '8'"),
        ("0 0 * * MON-FOO", "bad day-of-week field"),
        ("5-1 * * * *", "bad minute field '5-1'"),
        ("1,,2 * * * *", "bad minute field"),
        ("0 0 30 2 *", "day-of-month '30' never occurs in month '2'"),
        ("0 0 31 4,6 *", "never occurs"),
        ("0 0 L * *", "non-standard extension"),
        ("0 0 * * 5L", "non-standard extension"),
        ("0 0 * * MON#2", "non-standard extension"),
        ("0 0 ? * MON", "non-standard extension"),
    ],
)
def test_invalid_cron_expressions_name_the_wrong_field(expression: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as caught:
        CronSpec(expression)
    assert str(caught.value).startswith("invalid cron expression")


def test_naive_datetimes_are_refused() -> None:
    naive = datetime(2026, 5, 5)
    for spec in (CronSpec("@hourly"), IntervalSpec(60)):
        with pytest.raises(ValueError, match="after must be a timezone-aware datetime"):
            spec.next_after(naive)
        with pytest.raises(ValueError, match="end must be a timezone-aware datetime"):
            spec.ticks_between(utc("2026-05-05"), naive)
        with pytest.raises(ValueError, match="limit"):
            spec.ticks_between(utc("2026-05-05"), utc("2026-05-06"), -1)


# --- properties ------------------------------------------------------------------------------

ALL_MINUTES, ALL_HOURS = set(range(60)), set(range(24))
MINUTES = [
    ("*", ALL_MINUTES),
    ("*/15", {0, 15, 30, 45}),
    ("0", {0}),
    ("30", {30}),
    ("5,35", {5, 35}),
    ("30-30/7", {30}),
    ("10-50/10", {10, 20, 30, 40, 50}),
    ("0-4", {0, 1, 2, 3, 4}),
]
HOURS = [
    ("*", ALL_HOURS),
    ("0", {0}),
    ("2", {2}),
    ("1-3", {1, 2, 3}),
    ("*/6", {0, 6, 12, 18}),
    ("9,23", {9, 23}),
    ("9-9/3", {9}),
]
DAYS_OF_MONTH = [
    ("*", set(range(1, 32))),
    ("1", {1}),
    ("13", {13}),
    ("29", {29}),
    ("31", {31}),
    ("1-7", set(range(1, 8))),
    ("13-13/5", {13}),
    ("*/10", {1, 11, 21, 31}),
]
MONTHS = [
    ("*", set(range(1, 13))),
    ("2", {2}),
    ("MAR,oct,nov", {3, 10, 11}),
    ("1-6", {1, 2, 3, 4, 5, 6}),
    ("feb-2/3", {2}),
]
DAYS_OF_WEEK = [  # Sunday = 0
    ("*", set(range(7))),
    ("MON-FRI", {1, 2, 3, 4, 5}),
    ("0", {0}),
    ("7", {0}),
    ("sat,sun", {6, 0}),
    ("*/2", {0, 2, 4, 6}),
    ("5-5/1", {5}),
    ("FRI-fri/2", {5}),
]
ZONES = [
    "UTC",
    NEW_YORK,
    BERLIN,
    "Australia/Lord_Howe",
    "Asia/Kolkata",
    "America/Sao_Paulo",
    "America/Nuuk",
]
TRANSITIONS = [  # (zone, instant of a DST change in it)
    (NEW_YORK, utc("2026-03-08 07:00")),
    (NEW_YORK, utc("2026-11-01 06:00")),
    (BERLIN, utc("2026-03-29 01:00")),
    (BERLIN, utc("2026-10-25 01:00")),
    ("Australia/Lord_Howe", utc("2026-04-04 15:00")),  # 30-minute fall-back
    ("Australia/Lord_Howe", utc("2026-10-03 15:30")),  # 30-minute spring-forward
    ("America/Sao_Paulo", utc("2018-11-04 03:00")),  # gap at midnight
    ("America/Sao_Paulo", utc("2018-02-18 02:00")),
    ("Pacific/Apia", utc("2011-12-30 10:00")),  # a whole day skipped
    ("America/Nuuk", utc("2026-03-29 01:00")),  # gap 23:00-24:00, ending at midnight
]


class Expression:
    """A generated cron expression with the sets each field stands for (the test's oracle)."""

    def __init__(self, choice: tuple[tuple[str, set[int]], ...]) -> None:
        (self.minute, self.hour, self.dom, self.month, self.dow) = (c[1] for c in choice)
        self.text = " ".join(c[0] for c in choice)
        self.either_day = not (choice[2][0].startswith("*") or choice[4][0].startswith("*"))

    def matches(self, wall: datetime) -> bool:
        dom_ok = wall.day in self.dom
        dow_ok = (wall.weekday() + 1) % 7 in self.dow
        day_ok = (dom_ok or dow_ok) if self.either_day else (dom_ok and dow_ok)
        return (
            wall.minute in self.minute and wall.hour in self.hour and wall.month in self.month
        ) and day_ok


def field_of(options: list[tuple[str, set[int]]]) -> st.SearchStrategy[tuple[str, set[int]]]:
    # `*` half of the time, so that generated days often contain a DST change
    return st.one_of(st.just(options[0]), st.sampled_from(options))


expressions = st.tuples(
    *(field_of(f) for f in (MINUTES, HOURS, DAYS_OF_MONTH, MONTHS, DAYS_OF_WEEK))
).map(Expression)
near_transitions = st.builds(
    lambda pair, minutes: (pair[0], pair[1] + timedelta(minutes=minutes)),
    st.sampled_from(TRANSITIONS),
    st.integers(min_value=-28 * 60, max_value=60),
)
anywhere = st.tuples(
    st.sampled_from(ZONES),
    st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2035, 1, 1)).map(
        lambda d: d.replace(tzinfo=UTC)
    ),
)
zones_and_starts = st.one_of(near_transitions, anywhere)


def build(expression: Expression, zone: str) -> CronSpec:
    try:
        return CronSpec(expression.text, zone)
    except ValueError as exc:  # e.g. `31` with month `2` when a day field is `*`
        if "never occurs" not in str(exc):
            raise
        reject()


def expected_ticks(
    expression: Expression, zone: ZoneInfo, first: datetime, last: datetime
) -> Iterator[datetime]:
    """The oracle's DST rule, walking every wall-clock minute from `first` to `last`: a
    matching wall time fires at its first occurrence, or at the first existing minute after
    the gap that swallowed it."""
    in_gap: list[datetime] = []
    wall = first
    while wall <= last:
        instant = wall.replace(tzinfo=zone).astimezone(UTC)
        if instant.astimezone(zone).replace(tzinfo=None) != wall:  # swallowed by a gap
            if expression.matches(wall):
                in_gap.append(wall)
        else:
            if in_gap or expression.matches(wall):
                yield instant
            in_gap = []
        wall += timedelta(minutes=1)


def skipped_walls(instant: datetime, zone: str) -> list[datetime]:
    """The whole-minute wall times skipped by a jump that ends at `instant` (none if no jump)."""
    tz = ZoneInfo(zone)
    local = instant.astimezone(tz).replace(tzinfo=None)
    first = (instant - timedelta(seconds=1)).astimezone(tz).replace(tzinfo=None)
    first += timedelta(seconds=1)
    walls, wall = [], first.replace(second=0) + timedelta(minutes=first.second > 0)
    while wall < local:
        walls.append(wall)
        wall += timedelta(minutes=1)
    return walls


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(expressions, zones_and_starts)
def test_next_after_is_strictly_increasing_and_every_tick_matches(
    expression: Expression, zone_and_start: tuple[str, datetime]
) -> None:
    zone, start = zone_and_start
    spec = build(expression, zone)
    found = spec.ticks_between(start, start + timedelta(days=3 * 366), limit=25)
    previous = start
    for tick in found:
        assert tick > previous
        assert spec.next_after(previous) == tick
        local = tick.astimezone(ZoneInfo(zone)).replace(tzinfo=None)
        if not expression.matches(local):  # then it must be the end of a gap it stands for
            assert any(expression.matches(wall) for wall in skipped_walls(tick, zone)), (
                f"{tick} does not match {expression.text} and ends no gap holding a tick"
            )
        previous = tick


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(expressions, near_transitions)
def test_ticks_between_equals_a_brute_force_over_wall_clock_minutes(
    expression: Expression, zone_and_start: tuple[str, datetime]
) -> None:
    zone, start = zone_and_start
    spec = build(expression, zone)
    tz = ZoneInfo(zone)
    end = start + timedelta(hours=30)
    wall = start.astimezone(tz).replace(tzinfo=None, second=0, microsecond=0) - timedelta(hours=2)
    stop = end.astimezone(tz).replace(tzinfo=None) + timedelta(hours=2)
    expected = sorted({t for t in expected_ticks(expression, tz, wall, stop) if start < t <= end})
    assert spec.ticks_between(start, end, limit=10_000) == expected


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(expressions, zones_and_starts, st.integers(min_value=0, max_value=8 * 24 * 60))
def test_counting_by_days_equals_walking_tick_by_tick(
    expression: Expression, zone_and_start: tuple[str, datetime], minutes: int
) -> None:
    zone, start = zone_and_start
    spec = build(expression, zone)
    end = start + timedelta(minutes=minutes)
    assert spec._count_between(start, end) == spec._walk_count(start, end)


@settings(max_examples=100, deadline=None)
@given(
    st.integers(min_value=1, max_value=10**11),
    st.floats(min_value=0, max_value=1, exclude_max=True),
    st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2200, 1, 1)),
)
def test_interval_ticks_lie_on_the_grid_and_increase(
    every_us: int, offset_fraction: float, start: datetime
) -> None:
    every = every_us / 1_000_000
    spec = IntervalSpec(every, int(every_us * offset_fraction) / 1_000_000)
    begin = start.replace(tzinfo=UTC)
    found = spec.ticks_between(begin, begin + timedelta(microseconds=every_us * 5), limit=10)
    assert len(found) == 5
    first_us = (found[0] - spec_module.EPOCH) // timedelta(microseconds=1)
    assert (first_us - spec._offset_us) % every_us == 0
    assert found[0] > begin >= found[0] - timedelta(microseconds=every_us)
    for earlier, later in pairwise(found):
        assert later - earlier == timedelta(microseconds=every_us)
        assert spec.next_after(earlier) == later


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="0123456789*/,-LW#? MONFRIJANSUTD@abdehilmnoruwy", max_size=24))
def test_any_text_is_either_a_valid_expression_or_a_value_error(text: str) -> None:
    try:
        spec = CronSpec(text)
    except ValueError as exc:
        message = str(exc)
    else:
        assert spec.next_after(utc("2026-01-01")) > utc("2026-01-01")
        assert spec.describe().endswith("(UTC)")
        return
    assert message.startswith("invalid cron expression")
