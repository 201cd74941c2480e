"""When a schedule's ticks fall: cron and interval specs, and the catch-up policy.

Everything here is pure: no wall clock, no I/O. Every time is passed in and returned as a
timezone-aware datetime; results are always in UTC. Naive datetimes are refused.

Cron (`CronSpec`)
    Five fields, ``minute hour day-of-month month day-of-week``, evaluated by the `cronsim`
    library, plus the macros ``@hourly``, ``@daily``/``@midnight``, ``@weekly``,
    ``@monthly`` and ``@yearly``/``@annually``. Fields take ``*``, values, ranges ``1-5``,
    lists ``1,15``, steps ``*/15`` and ``10-50/10``, and names (``JAN``-``DEC``,
    ``SUN``-``SAT``, any case); 0 and 7 are both Sunday. Classic Vixie day matching: when
    both day-of-month and day-of-week are restricted, a day matches if *either* does; a field
    counts as unrestricted when it starts with ``*`` (so ``*/2`` is unrestricted, exactly as
    in Vixie cron). The non-Vixie extensions ``L``, ``W``, ``#`` and ``?`` are refused, so
    every stored expression means the same thing in any standard cron. A stepped range whose
    ends are equal is that one value, as in Vixie cron (``9-9/3`` is 09 only, ``5-5/1`` is
    Friday only; cronsim alone would read them as ``9-23/3`` and ``5-7``).

Ends of the calendar
    A tick exists only where ``datetime`` can hold both its wall time and its instant (years
    1 to 9999). When no tick can follow a time within that range, `next_after` raises
    `CalendarRangeError` (a `ValueError` too); `ticks_between` simply ends.

Time zones and daylight saving
    An expression names *wall-clock* times in its IANA zone (default UTC). The rule is
    **once per wall-clock time**, for every expression alike:

    * a wall time that does not exist (skipped by a spring-forward jump, e.g. 02:30 on
      2026-03-08 in America/New_York) fires once, at the first real instant after the jump
      (03:00 EDT). Several skipped wall times (``*/15 2 * * *``) collapse into that one
      firing, together with the expression's own tick at that instant if it has one
      (``0 2,3 * * *`` fires once, at 03:00 EDT, that day);
    * a wall time that happens twice (fall-back, e.g. 01:30 on 2026-11-01 in
      America/New_York) fires once, at its first occurrence (01:30 EDT, fold=0). This holds
      for wildcard-hour expressions too: ``30 * * * *`` fires at 00:30 EDT, 01:30 EDT and
      02:30 EST that day, not at the second 01:30 (so the real gap between firings is two
      hours there, and on spring-forward day 03:00 and 03:30 EDT both fire).

    Cronsim's own DST handling (Debian style) fires both 01:30s for wildcard expressions and
    silently drops gap ticks of ``*/15 2 * * *``; it can also return a time *before* a start
    that falls in the second pass of an overlap. So cronsim only matches naive wall times
    here, and this module maps them to instants. Use ``timezone="UTC"`` or an interval
    when the cadence must follow elapsed time rather than the local clock.

Intervals (`IntervalSpec`)
    Ticks at ``1970-01-01T00:00Z + offset + k * every`` for whole k, with microsecond
    precision, so they do not drift and stay the same across restarts and dispatchers.

Catch-up policy (`catch_up`)
    After downtime, the ticks missed between the first unfired tick and ``now`` are split by
    ``catchup_window``: ticks due at or after ``now - catchup_window`` run, oldest first, each
    once (the store's default window is one minute); older ones are skipped and only
    counted. At most ``limit`` ticks run: when more fall inside the window, the oldest of
    them are skipped too. The next tick to wait for is the first one strictly after ``now``.
    Overlap with a still-running execution is decided by the dispatcher, not here.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from itertools import islice, takewhile
from typing import TypeAlias
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from wovyr.errors import CalendarRangeError
from wovyr.fields import format_duration, parse_duration

__all__ = ["CatchUp", "CronSpec", "IntervalSpec", "Spec", "catch_up", "parse_spec"]

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_SECOND = timedelta(seconds=1)
_MAX_EVERY = 100 * 365 * 86400.0
_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_FIELDS = ("minute", "hour", "day-of-month", "month", "day-of-week")
_ALLOWED = {
    "minute": "0-59",
    "hour": "0-23",
    "day-of-month": "1-31",
    "month": "1-12 or JAN-DEC",
    "day-of-week": "0-7 (0 and 7 are Sunday) or SUN-SAT",
}
_FORMS = "values, ranges (1-5), lists (1,15), steps (*/15, 10-50/10)"
_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_WEEKDAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
_NAMES = {
    "month": {name: number for number, name in enumerate(_MONTHS, 1)},
    "day-of-week": {name: number for number, name in enumerate(_WEEKDAYS)},
}


@dataclass(frozen=True)
class CronSpec:
    """A 5-field cron expression (or macro) read as wall-clock times in an IANA zone."""

    expression: str
    timezone: str = "UTC"
    _fields: str = field(init=False, repr=False, compare=False)
    _zone: ZoneInfo = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        expression = " ".join(str(self.expression).split())
        object.__setattr__(self, "expression", expression)
        object.__setattr__(self, "_fields", _cron_fields(expression))
        object.__setattr__(self, "_zone", _load_zone(self.timezone))

    def next_after(self, after: datetime) -> datetime:
        """The first tick strictly after `after`."""
        start = _aware(after, "after")
        try:
            return next(self._walk(start))
        except StopIteration:  # cronsim gives up after 50 years without a match
            raise ValueError(
                f"{self.describe()} has no tick in the 50 years after {start}"
            ) from None
        except _PastTheEnd:
            raise _no_tick_before_the_end(self.describe(), start) from None

    def ticks_between(self, start: datetime, end: datetime, limit: int = 1000) -> list[datetime]:
        """Ticks in (start, end], oldest first, at most `limit` of them."""
        return _take(self._ticks_after(_aware(start, "start")), _aware(end, "end"), limit)

    def describe(self) -> str:
        """Plain English, e.g. 'At 09:00 on Monday through Friday (Europe/Berlin)'."""
        explained = CronSim(self._fields, datetime(2000, 1, 1)).explain()
        return f"{explained} ({self.timezone})"

    def _ticks_after(self, after: datetime) -> Iterator[datetime]:
        """Ticks strictly after `after`, ending where the calendar does."""
        with suppress(_PastTheEnd):
            yield from self._walk(after)

    def _walk(self, after: datetime) -> Iterator[datetime]:
        """Ticks strictly after `after`; raises _PastTheEnd where the next tick's wall time or
        instant would fall after year 9999."""
        # Cronsim walks naive wall-clock times; each is mapped to its instant here. The
        # mapping never decreases, so skipping instants <= the last one yielded removes both
        # collapsed gap ticks and wall times that were already passed in a fold=1 start.
        wall = _local(after, self._zone).replace(tzinfo=None)
        previous = after
        try:
            for local in CronSim(self._fields, wall):
                instant = _wall_to_instant(local, self._zone)
                if instant > previous:
                    previous = instant
                    yield instant
        except OverflowError:  # a wall time or its instant past year 9999
            raise _PastTheEnd from None

    def _count_between(self, start: datetime, end: datetime) -> int:
        """How many ticks lie in (start, end]. Whole local days with no UTC-offset change
        are counted from the field sets; only the edges and DST days are walked, so a year
        of every-minute ticks costs a few hundred day checks, not 525,600 steps."""
        matcher = CronSim(self._fields, datetime(2000, 1, 1))
        per_day = len(matcher.hours) * len(matcher.minutes) * len(matcher.seconds)
        total, cursor = 0, start  # ticks after `cursor` are not counted yet
        first, last = _local(start, self._zone).date(), _local(end, self._zone).date()
        day = first + timedelta(days=1) if first < last else last  # never past date.max
        while day < last:
            bounds = self._plain_day(day)
            if bounds is not None and cursor < bounds[0] and bounds[1] <= end:
                total += self._walk_count(cursor, bounds[0] - _MICROSECOND)
                if day.month in matcher.months and matcher.match_day(day):
                    total += per_day
                cursor = bounds[1] - _MICROSECOND
            day += timedelta(days=1)
        return total + self._walk_count(cursor, end)

    def _plain_day(self, day: date) -> tuple[datetime, datetime] | None:
        """[start, end) instants of local `day` if no offset change touches it, else None.
        Then its ticks are exactly its wall ticks, and no other day's gap collapses into it."""
        midnight = datetime(day.year, day.month, day.day)
        begin = midnight.replace(tzinfo=self._zone).astimezone(UTC)
        finish = (midnight + timedelta(days=1)).replace(tzinfo=self._zone).astimezone(UTC)
        offsets = {t.astimezone(self._zone).utcoffset() for t in (begin - _SECOND, finish)}
        # A gap or overlap inside the day changes its length; one ending at its first instant
        # (Nuuk skips 23:00-24:00) changes the offset across that instant.
        if finish - begin != timedelta(days=1) or len(offsets) != 1:
            return None
        return begin, finish

    def _walk_count(self, start: datetime, end: datetime) -> int:
        return sum(1 for _ in takewhile(lambda t: t <= end, self._ticks_after(start)))

    def _nth_after(self, after: datetime, n: int) -> datetime:
        return next(islice(self._ticks_after(after), n - 1, None))


@dataclass(frozen=True)
class IntervalSpec:
    """Every `every` seconds, at `offset` seconds past each multiple counted from the epoch."""

    every: float
    offset: float = 0.0
    _every_us: int = field(init=False, repr=False, compare=False)
    _offset_us: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        every, offset = self.every, self.offset
        if isinstance(every, bool) or not math.isfinite(every) or every <= 0:
            raise ValueError(f"an interval must be greater than zero, got every={every!r}")
        if every > _MAX_EVERY:
            raise ValueError(f"an interval cannot exceed 100 years, got every={every!r}")
        every_us = round(every * 1_000_000)
        if every_us < 1:
            raise ValueError(f"an interval must be at least 1 microsecond, got every={every!r}")
        if isinstance(offset, bool) or not math.isfinite(offset) or not 0 <= offset < every:
            raise ValueError(
                f"an interval's offset must be at least 0 and less than every={every!r}, "
                f"got offset={offset!r}"
            )
        object.__setattr__(self, "_every_us", every_us)
        object.__setattr__(self, "_offset_us", round(offset * 1_000_000) % every_us)

    def next_after(self, after: datetime) -> datetime:
        """The first tick strictly after `after`."""
        start = _aware(after, "after")
        try:
            return self._nth_after(start, 1)
        except _PastTheEnd:
            raise _no_tick_before_the_end(self.describe(), start) from None

    def ticks_between(self, start: datetime, end: datetime, limit: int = 1000) -> list[datetime]:
        """Ticks in (start, end], oldest first, at most `limit` of them."""
        return _take(self._ticks_after(_aware(start, "start")), _aware(end, "end"), limit)

    def describe(self) -> str:
        """Plain English, e.g. 'every 15m (UTC-anchored)'."""
        text = f"every {_seconds_text(self.every)}"
        if self.offset:
            text += f", offset {_seconds_text(self.offset)}"
        return f"{text} (UTC-anchored)"

    def _index_at_or_before(self, moment: datetime) -> int:
        """k of the last tick at or before `moment`."""
        return (_micros(moment) - self._offset_us) // self._every_us

    def _tick(self, index: int) -> datetime:
        try:
            return EPOCH + timedelta(microseconds=index * self._every_us + self._offset_us)
        except OverflowError:  # ticks are after a representable time: only the end overflows
            raise _PastTheEnd from None

    def _ticks_after(self, after: datetime) -> Iterator[datetime]:
        """Ticks strictly after `after`, ending where the calendar does."""
        index = self._index_at_or_before(after) + 1
        with suppress(_PastTheEnd):
            while True:
                yield self._tick(index)
                index += 1

    def _count_between(self, start: datetime, end: datetime) -> int:
        return max(0, self._index_at_or_before(end) - self._index_at_or_before(start))

    def _nth_after(self, after: datetime, n: int) -> datetime:
        return self._tick(self._index_at_or_before(after) + n)


Spec: TypeAlias = CronSpec | IntervalSpec


@dataclass(frozen=True)
class CatchUp:
    """What to do about the ticks missed up to `now` (see the module docstring)."""

    run: list[datetime]
    skipped: int
    next_fire_at: datetime


def catch_up(
    spec: Spec,
    last_tick_due: datetime,
    now: datetime,
    window_seconds: float,
    limit: int = 1000,
) -> CatchUp:
    """Split the ticks in [last_tick_due, now] into those to run and those to skip.

    `last_tick_due` is the oldest tick that has not fired yet (the schedule's stored
    `next_fire_at`); it counts if it is a tick of `spec`. Ticks due at or after
    `now - window_seconds` run, oldest first, at most `limit` of them; older ones, and the
    oldest in-window ones beyond `limit`, are counted in `skipped`.
    """
    first, now = _aware(last_tick_due, "last_tick_due"), _aware(now, "now")
    if isinstance(window_seconds, bool) or not math.isfinite(window_seconds):
        raise ValueError(f"window_seconds must be a finite number, got {window_seconds!r}")
    if window_seconds < 0:
        raise ValueError(f"window_seconds cannot be negative, got {window_seconds!r}")
    _check_limit(limit)
    next_fire_at = spec.next_after(now)
    if first > now:
        return CatchUp(run=[], skipped=0, next_fire_at=next_fire_at)
    floor = first - _MICROSECOND  # ticks strictly after floor, so `first` itself is included
    try:
        too_old = now - timedelta(seconds=window_seconds) - _MICROSECOND
    except OverflowError:  # a window reaching before year 1 covers everything
        too_old = floor
    cutoff = max(floor, too_old)
    skipped = spec._count_between(floor, cutoff) if cutoff > floor else 0
    in_window = spec._count_between(cutoff, now)
    if in_window > limit:
        excess = in_window - limit
        cutoff = spec._nth_after(cutoff, excess)
        skipped += excess
    return CatchUp(
        run=spec.ticks_between(cutoff, now, limit), skipped=skipped, next_fire_at=next_fire_at
    )


def parse_spec(
    cron: str | None,
    every: str | float | None,
    timezone: str | None,
    offset: str | float | None = None,
) -> Spec:
    """Build a spec from user input (CLI flags, API fields); ValueError says what is wrong."""
    if cron is not None and every is not None:
        raise ValueError("give either a cron expression or an interval ('every'), not both")
    if cron is not None:
        if offset is not None:
            raise ValueError(
                "'offset' applies only to intervals; a cron expression sets its minutes"
            )
        return CronSpec(cron, "UTC" if timezone is None else timezone)
    if every is None:
        raise ValueError("a schedule needs a cron expression or an interval ('every')")
    if timezone not in (None, "UTC"):
        raise ValueError(
            f"a time zone ({timezone!r}) applies only to cron expressions; "
            "intervals are anchored to UTC"
        )
    seconds = _duration("every", every)
    return IntervalSpec(seconds, 0.0 if offset is None else _duration("offset", offset))


def _cron_fields(expression: str) -> str:
    """The 5-field form of `expression`, or ValueError naming the field that is wrong."""
    where = f"invalid cron expression {expression!r}"
    if not expression:
        raise ValueError(f"{where}: it is empty; use 5 fields such as '*/15 * * * *'")
    if expression.startswith("@"):
        macro = _MACROS.get(expression.lower())
        if macro is None:
            raise ValueError(f"{where}: unknown macro; use one of {', '.join(_MACROS)}")
        return macro
    parts = expression.split(" ")
    if len(parts) != 5:
        raise ValueError(
            f"{where}: expected 5 fields (minute hour day-of-month month day-of-week), "
            f"got {len(parts)}"
        )
    for name, value in zip(_FIELDS, parts, strict=True):
        upper = value.upper()
        if (
            "#" in upper
            or "?" in upper
            or (name in ("day-of-month", "day-of-week") and "L" in upper)
        ):
            raise ValueError(
                f"{where}: {name} field {value!r} uses a non-standard extension "
                "(L, W, #, ?), which is not supported"
            )
    fields = " ".join(_equal_ends_as_one_value(n, v) for n, v in zip(_FIELDS, parts, strict=True))
    _check_with_cronsim(expression, parts, where)  # e.g. a zero step, gone from `fields`
    _check_with_cronsim(fields, parts, where)  # e.g. `31 feb-2/3`: 31 never occurs in Feb
    return fields


def _equal_ends_as_one_value(name: str, value: str) -> str:
    """`value` with each stepped range whose ends are equal (``9-9/3``) written as that one
    value, as Vixie cron reads it. Cronsim reads a range holding one value like a lone start
    (``9/3``: every third hour from 9 through 23)."""
    terms = []
    for term in value.split(","):
        span, stepped = term.partition("/")[0], "/" in term
        first, ranged, last = span.partition("-")
        number = _field_number(name, first)
        one_value = stepped and number is not None and number == _field_number(name, last)
        terms.append(first if one_value and ranged else term)
    return ",".join(terms)


def _field_number(name: str, text: str) -> int | None:
    upper = text.upper()
    if upper.isascii() and upper.isdigit():
        return int(upper)
    return _NAMES.get(name, {}).get(upper)


def _check_with_cronsim(expression: str, parts: list[str], where: str) -> None:
    try:
        CronSim(expression, datetime(2000, 1, 1))
    except (CronSimError, ValueError) as exc:
        bad = str(exc).removeprefix("Bad ").strip()
        if bad not in _FIELDS:
            raise ValueError(f"{where}: {exc}") from None
        value = parts[_FIELDS.index(bad)]
        if bad == "day-of-month" and _day_of_month_alone_is_valid(value):
            raise ValueError(
                f"{where}: day-of-month {value!r} never occurs in month {parts[3]!r}"
            ) from None
        raise ValueError(
            f"{where}: bad {bad} field {value!r}; allowed {_ALLOWED[bad]}, as {_FORMS}"
        ) from None


def _day_of_month_alone_is_valid(value: str) -> bool:
    try:
        CronSim(f"0 0 {value} * *", datetime(2000, 1, 1))
    except (CronSimError, ValueError):
        return False
    return True


def _load_zone(name: str) -> ZoneInfo:
    hint = "use an IANA name such as 'Europe/Berlin', 'America/New_York' or 'UTC'"
    if name == "localtime":
        raise ValueError(f"time zone 'localtime' depends on the host; {hint}")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError, TypeError):
        raise ValueError(f"unknown time zone {name!r}; {hint} (names are case-sensitive)") from None


class _PastTheEnd(Exception):
    """The next tick would fall after 9999-12-31 (its wall time or its instant)."""


def _no_tick_before_the_end(described: str, after: datetime) -> CalendarRangeError:
    return CalendarRangeError(
        f"{described} has no tick after {after.isoformat()}: the next one would fall after "
        "the end of the calendar (year 9999)"
    )


def _local(instant: datetime, zone: ZoneInfo) -> datetime:
    """`instant` in `zone`; near the ends of the calendar its wall time may not exist."""
    try:
        return instant.astimezone(zone)
    except OverflowError:
        if instant.year > 1:
            raise _PastTheEnd from None
        raise CalendarRangeError(
            f"{instant.isoformat()} lies before the start of the calendar (year 1) "
            f"in time zone {zone.key}"
        ) from None


def _wall_to_instant(wall: datetime, zone: ZoneInfo) -> datetime:
    """The instant a naive wall-clock tick fires: its first occurrence, or the gap's end."""
    instant = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    if instant.astimezone(zone).replace(tzinfo=None) == wall:
        return instant
    # In a gap, fold=0 reads `wall` with the offset before the jump and fold=1 with the one
    # after, so the jump lies between the two readings; bisect to the whole second.
    after_offset = wall.replace(tzinfo=zone, fold=1).utcoffset()
    low, high = wall.replace(tzinfo=zone, fold=1).astimezone(UTC), instant
    while high - low > _SECOND:
        middle = low + timedelta(seconds=(high - low) // _SECOND // 2)
        if middle.astimezone(zone).utcoffset() == after_offset:
            high = middle
        else:
            low = middle
    return high


def _take(ticks: Iterator[datetime], end: datetime, limit: int) -> list[datetime]:
    _check_limit(limit)
    return list(islice(takewhile(lambda t: t <= end, ticks), limit))


def _check_limit(limit: int) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ValueError(f"limit must be a whole number >= 0, got {limit!r}")


def _aware(value: datetime, name: str) -> datetime:
    if not isinstance(value, datetime) or value.utcoffset() is None:
        raise ValueError(f"{name} must be a timezone-aware datetime, got {value!r}")
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise CalendarRangeError(
            f"{name} {value.isoformat()} lies outside the calendar (years 1 to 9999) in UTC"
        ) from None


def _micros(moment: datetime) -> int:
    return (moment - EPOCH) // _MICROSECOND


def _duration(name: str, value: str | float) -> float:
    try:
        return parse_duration(value)
    except ValueError as exc:
        if str(value).strip().startswith("-"):
            rule = "must be greater than zero" if name == "every" else "cannot be negative"
            raise ValueError(f"{name} {rule}, got {value!r}") from None
        raise ValueError(f"{name}: {exc}") from None


def _seconds_text(seconds: float) -> str:
    if seconds >= 1 and seconds == int(seconds):
        return format_duration(seconds)
    return f"{seconds:g}s"
