"""The column types of a declaration: what each reads, refuses, stores and writes.

The cases are the values a data engineer's app actually holds: text amounts with a scale
that must survive (``7.000``), a float where an exact decimal belongs, SQLite's 0/1 for a
boolean, a date where a timestamp is declared, NaN in a float column, a 64-bit overflow.
Each kind has one home, its codec (core/table/codecs.py); these tables pin its rules.
"""

from __future__ import annotations

from datetime import date, datetime, timezone
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline_assets.core.errors import DayFilesError, TypeValueError, UnknownTypeError
from pipeline_assets.core.table.codecs import CODECS, KINDS
from pipeline_assets.core.table.codecs.decimals import (
    DECIMAL_TEXT,
    PLAIN_DECIMAL_TEXT,
    format_decimal,
)
from pipeline_assets.core.table.types import ColumnType

UTC = timezone.utc
PARIS = ZoneInfo("Europe/Paris")


@pytest.mark.parametrize(
    ("name", "value", "tz", "parsed"),
    [
        ("integer", 7, UTC, 7),
        ("integer", " -12 ", UTC, -12),
        ("integer", Decimal("3"), UTC, 3),
        ("integer", 2**63 - 1, UTC, 2**63 - 1),
        ("text", "café ☕", UTC, "café ☕"),
        ("text", "", UTC, ""),
        ("text", b"caf\xc3\xa9", UTC, "café"),
        ("text", 42, UTC, "42"),
        ("decimal", "7.000", UTC, Decimal("7.000")),
        ("decimal", " -5.5 ", UTC, Decimal("-5.5")),
        ("decimal", 40, UTC, Decimal(40)),
        ("decimal", Decimal("0.10"), UTC, Decimal("0.10")),
        ("decimal(10,2)", "1.1", UTC, Decimal("1.10")),
        ("decimal(10,2)", "12345678.00", UTC, Decimal("12345678.00")),
        ("decimal(4,0)", 9999, UTC, Decimal("9999")),
        ("float", "2.5", UTC, 2.5),
        ("float", 3, UTC, 3.0),
        ("boolean", True, UTC, True),
        ("boolean", 0, UTC, False),
        ("boolean", "t", UTC, True),
        ("boolean", " FALSE ", UTC, False),
        ("date", "2026-01-25", UTC, date(2026, 1, 25)),
        ("date", date(2026, 2, 28), UTC, date(2026, 2, 28)),
        ("date", datetime(2026, 2, 28), UTC, date(2026, 2, 28)),
        ("timestamp", "2026-01-25T03:00:00Z", PARIS, datetime(2026, 1, 25, 3, tzinfo=UTC)),
        # no offset: read in the pipeline's zone; a bare date is midnight there
        ("timestamp", "2026-01-25T03:00:00", PARIS, datetime(2026, 1, 25, 2, tzinfo=UTC)),
        ("timestamp", "2026-01-25", PARIS, datetime(2026, 1, 24, 23, tzinfo=UTC)),
        ("timestamp", date(2026, 1, 25), UTC, datetime(2026, 1, 25, tzinfo=UTC)),
    ],
)
def test_a_type_reads_what_a_database_holds_for_it(name, value, tz, parsed):
    got = ColumnType.named(name).parse(value, tz)
    assert got == parsed and type(got) is type(parsed)
    if isinstance(parsed, Decimal):  # the scale is part of the value: 7.000 stays 7.000
        assert str(got) == str(parsed)


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("integer", 1.0, "not an integer"),
        ("integer", True, "not an integer"),
        ("integer", "1.5", "not an integer"),
        ("integer", 2**63, "64 bits"),
        ("integer", Decimal("2.5"), "not an integer"),
        ("text", b"\xff", "UTF-8"),
        ("decimal", 40.0, "binary float"),
        ("decimal", "1e3", "decimal number"),
        ("decimal", "12,50", "decimal number"),
        ("decimal", Decimal("NaN"), "finite"),
        ("decimal(10,2)", "1.125", "more than 2 decimal places"),
        ("decimal(4,2)", "123.00", "more than 2 digits before the point"),
        ("float", "nan", "finite"),
        ("float", float("inf"), "finite"),
        ("float", "abc", "not a number"),
        ("boolean", 2, "not a boolean"),
        ("boolean", "maybe", "not a boolean"),
        ("date", "2026-02-30", "not a valid day"),
        ("date", "25/01/2026", "YYYY-MM-DD"),
        ("date", datetime(2026, 1, 25, 3), "a timestamp, not a date"),
        ("timestamp", "yesterday", "ISO-8601"),
        ("timestamp", "2026-01-25T25:00", "not a valid date or time"),
    ],
)
def test_a_type_refuses_what_it_cannot_hold_and_says_why(name, value, says):
    with pytest.raises(TypeValueError, match=says):
        ColumnType.named(name).parse(value, UTC)


@pytest.mark.parametrize(
    ("name", "value", "stored", "json"),
    [
        ("integer", 7, 7, 7),
        ("decimal", Decimal("7.000"), "7.000", "7.000"),
        ("decimal(10,2)", Decimal("1.10"), "1.10", "1.10"),
        ("boolean", False, False, False),
        ("date", date(2026, 1, 25), "2026-01-25", "2026-01-25"),
        (
            "timestamp",
            datetime(2026, 1, 25, 2, tzinfo=UTC),
            "2026-01-25T02:00:00.000000+00:00",
            "2026-01-25T03:00:00+01:00",
        ),
        ("text", None, None, None),
    ],
)
def test_a_type_stores_exact_text_and_writes_json_in_the_pipelines_zone(name, value, stored, json):
    kind = ColumnType.named(name)
    assert kind.stored(value) == stored
    assert kind.to_json(value, PARIS) == json
    assert kind.from_stored(stored, PARIS) == value


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("int", "integer, text, decimal"),
        ("decimal(2)", "integer, text, decimal"),
        ("varchar", "integer, text, decimal"),
        ("", "integer, text, decimal"),
        (None, "integer, text, decimal"),
        (5, "integer, text, decimal"),
        ("integer(3,1)", "integer, text, decimal"),
        ("decimal(2,3)", "0 <= S <= P"),
        ("decimal(0,0)", "1 <= P"),
    ],
)
def test_an_unknown_type_lists_the_types_there_are(name, says):
    with pytest.raises(UnknownTypeError, match=says):
        ColumnType.named(name)


@pytest.mark.parametrize(
    ("old", "new", "fits"),
    [
        ("integer", "decimal(19,0)", True),
        ("integer", "decimal(12,2)", False),  # 10 digits before the point: a big id overflows
        ("integer", "decimal", True),
        ("decimal(10,2)", "decimal(12,3)", True),
        ("decimal(10,2)", "decimal(10,3)", False),
        ("decimal(10,2)", "decimal", True),
        ("decimal", "decimal(10,2)", False),
        ("date", "timestamp", True),
        ("timestamp", "date", False),
        ("integer", "boolean", False),
        ("text", "text", True),
    ],
)
def test_a_stored_type_widens_only_where_every_value_fits(old, new, fits):
    assert ColumnType.named(old).widens_to(ColumnType.named(new)) is fits


def test_one_decimal_pattern_and_its_plain_subset_agree():
    """The plain subset is what vectorized readers pass through unchanged: every text it
    accepts must be accepted by the full pattern and written back as it was."""
    import re

    for text in ["0", "-0.50", "40.00", "123456789.123", "7"]:
        assert re.fullmatch(PLAIN_DECIMAL_TEXT, text) and re.fullmatch(DECIMAL_TEXT, text)
        assert format_decimal(ColumnType.named("decimal").parse(text, UTC)) == text
    for text in ["+1", "007", "1e3", ".5"]:
        assert not re.fullmatch(PLAIN_DECIMAL_TEXT, text)


@given(
    st.sampled_from(["decimal", "decimal(6,2)", "decimal(4,0)", "decimal(3,3)", "decimal(20,4)"]),
    st.from_regex(r"-?[0-9]{1,6}(\.[0-9]{1,5})?", fullmatch=True),
)
def test_the_verify_hash_takes_as_written_exactly_what_the_day_file_writes_unchanged(name, text):
    """A day file's bytes have two builders (the writer's, from Python values, and
    verify's, from Arrow arrays): verify's passes a stored decimal through when the codec's
    plain pattern holds it, so that must be exactly when the writer keeps the text."""
    import re

    kind = ColumnType.named(name)
    try:
        kept = kind.codec.file_value(kind, text, "row 1", "price") == text
    except DayFilesError:
        kept = False
    assert bool(re.fullmatch(kind.codec.plain_pattern(kind), text)) is kept


def test_every_kind_has_one_codec_that_names_its_sql_type():
    for kind in KINDS:
        codec = ColumnType(kind).codec
        assert codec.kind == kind and codec is CODECS[kind]
        assert codec.sql_type(ColumnType(kind)) is not None
