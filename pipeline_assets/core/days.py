"""Days in the pipeline's time zone: ranges of consecutive days, and "yesterday".

The one home of these rules: ``verify`` groups its repair commands by the same ranges
the refresh sensor launches runs for, and the daily schedule and the refresh sensor agree
on which day is the newest partition.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date, datetime, timedelta, tzinfo

from .times import day_end, day_of, day_start, parse_day


def runs(days: Iterable[str]) -> list[tuple[str, str]]:
    """Consecutive days grouped: ``["01-03", "01-04", "01-09"]`` → ``[(03, 04), (09, 09)]``.

    Calendar days, not strings (``02-28`` and ``03-01`` are consecutive); duplicates and
    order do not matter; each range is ``(first, last)``, both inclusive.
    """
    out: list[list[date]] = []
    for day in sorted({parse_day(str(text)) for text in days}):
        if out and day - out[-1][1] == timedelta(days=1):
            out[-1][1] = day
        else:
            out.append([day, day])
    return [(first.isoformat(), last.isoformat()) for first, last in out]


def spans(days: Iterable[str | date], tz: tzinfo) -> list[tuple[datetime, datetime]]:
    """The instants of :func:`runs` of ``days``: ``[day_start(first), day_end(last))`` in
    ``tz``, which hold every instant of those days (a repeated midnight included)."""
    return [
        (day_start(parse_day(first), tz), day_end(parse_day(last), tz))
        for first, last in runs(days)
    ]


def days_between(first: date, last: date) -> list[str]:
    """Every day from ``first`` to ``last`` inclusive, as ``YYYY-MM-DD``."""
    return [(first + timedelta(days=n)).isoformat() for n in range((last - first).days + 1)]


def yesterday(moment: datetime, tz: tzinfo) -> date:
    """The day before the one ``moment`` falls on in ``tz``: the newest daily partition.

    A day's partition exists once the day is over, so at ``moment`` the newest one is
    yesterday; it is also the day the daily schedule builds.
    """
    return day_of(moment, tz) - timedelta(days=1)
