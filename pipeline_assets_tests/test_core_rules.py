"""Tables of cases for the pure rules: timestamps, money, validation, watermark arithmetic.

These are the places where a quiet mistake loses or doubles a row: a timestamp read in
the wrong zone moves an order to another day, a float amount stops being exact, a
watermark that moves back re-reads (harmless) but one that skips ahead loses rows.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline_assets.core.errors import AmountError, InvalidRowError, TimeValueError
from pipeline_assets.core.table.money import format_amount, parse_amount
from pipeline_assets.core.times import (
    canonical,
    day_end,
    day_of,
    day_start,
    from_canonical,
    to_instant,
    zone,
)
from pipeline_assets.core.warehouse import watermark as wm
from pipeline_assets_tests.orders import stored, validate

UTC = timezone.utc
NY = zone("America/New_York")


def utc(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


@pytest.mark.parametrize(
    "value, tz, expected",
    [
        # a bare date is midnight of that day in the pipeline's zone, whatever the zone
        ("2026-01-25", UTC, utc(2026, 1, 25)),
        ("2026-01-25", NY, utc(2026, 1, 25, 5)),
        (date(2026, 1, 25), NY, utc(2026, 1, 25, 5)),
        # a timestamp without offset is read in the pipeline's zone
        ("2026-01-25T03:00:00", UTC, utc(2026, 1, 25, 3)),
        ("2026-01-25T03:00:00", NY, utc(2026, 1, 25, 8)),
        ("2026-01-25 03:00", UTC, utc(2026, 1, 25, 3)),
        (datetime(2026, 1, 25, 3), NY, utc(2026, 1, 25, 8)),
        # an offset wins over the zone
        ("2026-01-25T03:00:00+00:00", NY, utc(2026, 1, 25, 3)),
        ("2026-01-25T03:00:00Z", NY, utc(2026, 1, 25, 3)),
        ("2026-01-25T03:00:00-0500", UTC, utc(2026, 1, 25, 8)),
        ("2026-01-25T03:00:00+05:30", UTC, utc(2026, 1, 24, 21, 30)),
        ("2026-01-25T03:00:00.5+00", UTC, utc(2026, 1, 25, 3, 0, 0, 500_000)),
        ("2026-01-25T03:00:00.123456789Z", UTC, utc(2026, 1, 25, 3, 0, 0, 123_456)),
        (datetime(2026, 1, 25, 3, tzinfo=UTC), NY, utc(2026, 1, 25, 3)),
        ("  2026-01-25  ", UTC, utc(2026, 1, 25)),
    ],
)
def test_every_form_of_updated_at_becomes_the_same_instant(value, tz, expected):
    assert to_instant(value, tz) == expected


@pytest.mark.parametrize(
    "value",
    [
        "",
        "yesterday",
        "2026-13-01",
        "2026-02-30",
        "2026-01-25T25:00:00",
        "25/01/2026",
        "2026-01-25T03:00:00+25:00",
        "20260125",
        1737770000,
        3.5,
        None,
    ],
)
def test_unparseable_timestamps_are_refused_with_the_value(value):
    with pytest.raises(TimeValueError) as err:
        to_instant(value, UTC)
    assert repr(value) in str(err.value) or str(value) in str(err.value)


def test_mixed_forms_compare_as_instants_not_as_strings():
    # As strings "2026-01-25T01:00:00+05:00" > "2026-01-24T22:00:00Z", but it is earlier.
    east = to_instant("2026-01-25T01:00:00+05:00", UTC)
    west = to_instant("2026-01-24T22:00:00Z", UTC)
    assert east < west
    assert canonical(east) < canonical(west)


@given(
    st.datetimes(
        min_value=datetime(1970, 1, 2),
        max_value=datetime(9998, 12, 30),
        timezones=st.sampled_from([UTC, NY, zone("Asia/Kolkata")]),
    ),
    st.datetimes(
        min_value=datetime(1970, 1, 2),
        max_value=datetime(9998, 12, 30),
        timezones=st.sampled_from([UTC, NY, zone("Pacific/Kiritimati")]),
    ),
)
def test_canonical_text_sorts_exactly_as_instants(a, b):
    """The warehouse compares canonical text in SQL; that must equal instant order."""
    assert (canonical(a) < canonical(b)) == (a < b)
    assert len(canonical(a)) == len(canonical(b)) == 32
    # timestamps: Python never calls an instant in a DST gap equal to one in UTC
    assert from_canonical(canonical(a)).timestamp() == a.timestamp()


@pytest.mark.parametrize(
    "value, tz, day",
    [
        ("2026-01-25T03:00:00+00:00", UTC, date(2026, 1, 25)),
        ("2026-01-25T03:00:00+00:00", NY, date(2026, 1, 24)),  # the example
        ("2026-01-25", NY, date(2026, 1, 25)),  # a bare date stays on its day
        ("2026-03-08T06:59:59Z", NY, date(2026, 3, 8)),  # DST starts that night
    ],
)
def test_the_day_a_row_belongs_to(value, tz, day):
    assert day_of(to_instant(value, tz), tz) == day


@given(
    st.sampled_from(["America/St_Johns", "America/New_York", "America/Santiago", "Asia/Gaza"]),
    st.datetimes(min_value=datetime(1980, 1, 1), max_value=datetime(2030, 1, 1)),
)
def test_a_days_span_holds_every_instant_of_the_day(name, wall):
    """A day is read from the warehouse as ``[day_start, day_end)``: every instant whose
    day it is lies inside, even where the clocks go back across midnight (St. John's,
    1987-2010: at 00:01 to 23:01, so the day's last hour follows the next day's first
    minute)."""
    tz = zone(name)
    instant = wall.replace(tzinfo=timezone.utc)
    day = day_of(instant, tz)
    assert day_start(day, tz) <= instant < day_end(day, tz)


def test_the_last_hour_of_a_day_that_repeats_across_midnight_is_in_its_span():
    tz = zone("America/St_Johns")
    late = datetime(1987, 10, 25, 2, 31, tzinfo=timezone.utc)  # 23:01 again, on the 24th
    assert day_of(late, tz) == date(1987, 10, 24)
    assert day_start(date(1987, 10, 25), tz) < late < day_end(date(1987, 10, 24), tz)


@pytest.mark.parametrize(
    "value, text",
    [
        ("40.00", "40.00"),
        ("22", "22"),
        (" 0.10 ", "0.10"),
        ("-5.50", "-5.50"),
        (Decimal("18.20"), "18.20"),
        (7, "7"),
        ("1234567890123.45", "1234567890123.45"),
    ],
)
def test_amounts_stay_exact_and_keep_their_text(value, text):
    assert format_amount(parse_amount(value)) == text


@pytest.mark.parametrize(
    "value", ["", "abc", "1e3", "40,00", "NaN", "Infinity", Decimal("NaN"), 40.0, True, "4 0"]
)
def test_inexact_or_unreadable_amounts_are_refused(value):
    with pytest.raises(AmountError):
        parse_amount(value)


@pytest.mark.parametrize(
    "row, column, fragment",
    [
        ((None, "paid", "1.00", "2026-01-25"), "order_id", "a row with no order_id"),
        (("abc", "paid", "1.00", "2026-01-25"), "order_id", "order abc"),
        ((187, None, "1.00", "2026-01-25"), "status", "order 187"),
        ((187, "  ", "1.00", "2026-01-25"), "status", "order 187"),
        ((187, "paid", None, "2026-01-25"), "amount", "the amount is missing"),
        ((187, "paid", "twelve", "2026-01-25"), "amount", "'twelve'"),
        ((187, "paid", "1.00", None), "updated_at", "the timestamp is missing"),
        ((187, "paid", "1.00", "2026-02-30"), "updated_at", "'2026-02-30'"),
    ],
)
def test_validation_names_the_order_the_column_and_the_value(row, column, fragment):
    with pytest.raises(InvalidRowError) as err:
        validate(*row, tz=UTC)
    message = str(err.value)
    assert err.value.column == column
    assert f"column {column}" in message and fragment in message
    assert "Nothing was written" in message


def test_a_valid_row_is_normalized_for_storage():
    order = validate("105", "paid", "22.00", "2026-01-25", tz=NY)
    assert stored(order) == (105, "paid", "22.00", "2026-01-25T05:00:00.000000+00:00")
    assert day_of(order["updated_at"], NY) == date(2026, 1, 25) and order["status"] == "paid"


W = utc(2026, 1, 25)


@pytest.mark.parametrize(
    "watermark, lookback, start",
    [(None, 2, None), (W, 2, utc(2026, 1, 23)), (W, 0, W), (W, 7, utc(2026, 1, 18))],
)
def test_the_window_starts_lookback_days_before_the_watermark(watermark, lookback, start):
    assert wm.window_start(watermark, lookback) == start


def test_a_negative_lookback_is_refused():
    with pytest.raises(wm.WatermarkError, match="LOOKBACK_DAYS"):
        wm.window_start(W, -1)


@pytest.mark.parametrize(
    "watermark, newest, after",
    [
        (None, None, None),  # nothing read on the first run: still nothing
        (None, W, W),
        (W, None, W),  # nothing read: stay
        (W, W + timedelta(days=1), W + timedelta(days=1)),
        (W, W - timedelta(days=1), W),  # only late rows read: never back
        (W, W, W),
    ],
)
def test_the_watermark_only_moves_forward(watermark, newest, after):
    assert wm.advance(watermark, newest) == after
