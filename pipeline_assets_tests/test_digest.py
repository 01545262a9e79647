"""The per-row hash, the per-day checksums that ``orders_match_source`` and ``verify``
compare, and the batch digest behind batch ids: computed over whole Arrow batches, they
must equal the rules written out in :mod:`pipeline_assets.core.rows.digest`'s docstring,
recomputed in plain Python from that text alone (:mod:`.plain`), for ``orders`` and for
``payments`` (a composite key, every type, NULLs) alike: on the texts where a vectorized
version goes wrong first — empty, exactly one word, one byte more, multi-byte UTF-8,
longer than the gathered block — and on random rows. A day's checksum must not depend on
how its rows are batched or ordered, and orders' fingerprints must never drift: batch ids
and checksums already recorded are pinned here as the code before declarations made them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
from datetime import date, datetime, timezone
from decimal import Decimal

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline_assets.core.rows import digest
from pipeline_assets.core.rows.digest import (
    GATHER_BYTES,
    DayDigest,
    add_days,
    feed_batch_digest,
    kept_rows,
    row_hashes,
)
from pipeline_assets.core.table import ORDERS, working
from pipeline_assets.core.table.spec import DailyFiles

from . import plain
from .plain import row_hash
from .tables import PAYMENTS, TABLES

UTC = timezone.utc
STAMP = "2026-01-25T03:00:00.000000+00:00"
TEXTS = [
    "",
    "p",
    "paid",
    "1234567",
    "12345678",
    "123456789",
    "x" * 16,
    "x" * 17,
    "ünïcødé",
    "€" * 3,
    "a\x00",
    "\x00",
    "x" * (GATHER_BYTES - 1),
    "x" * GATHER_BYTES,
    "y" * (GATHER_BYTES + 1),
    "z" * 300,
    "\x1e",
    "\x1eabc",
    "a\x1fb",
]
ARROW = {"integer": pa.int64(), "float": pa.float64(), "boolean": pa.bool_()}


def table(spec, rows: list, days: list[int] | None = None) -> pa.Table:
    """Stored rows (values in declaration order) as the Arrow table the digests take."""
    columns = {}
    for i, column in enumerate(spec.columns):
        columns[column.name] = pa.array(
            [row[i] for row in rows], ARROW.get(column.type.kind, pa.string())
        )
    if days is not None:
        columns[working.DAY] = pa.array(days, pa.int32())
    return pa.table(columns)


def orders(rows: list[tuple]) -> pa.Table:
    """Orders rows, each with its day as a fifth value if it has one."""
    days = [r[4] for r in rows] if rows and len(rows[0]) == 5 else None
    return table(ORDERS, [r[:4] for r in rows], days)


def batch_digest(spec, rows: list, chunked: int | None = None) -> str:
    """The batch digest of ``rows``, fed whole or (``chunked``) in Arrow chunks."""
    arrow = table(spec, rows)
    if chunked:
        arrow = pa.concat_tables([arrow.slice(i, chunked) for i in range(0, len(rows), chunked)])
    h = hashlib.sha256()
    feed_batch_digest(h, arrow, spec)
    return h.hexdigest()


def plain_digest(spec, rows: list) -> str:
    return hashlib.sha256(b"".join(plain.digest_line(spec, row) for row in rows)).hexdigest()


def plain_days(spec, rows: list, days: list[int], kept: list[bool]) -> dict[int, DayDigest]:
    out: dict[int, DayDigest] = {}
    for row, day, keep in zip(rows, days, kept, strict=True):
        out.setdefault(day, DayDigest()).add(1, row_hash(spec, row), keep)
    return out


# --- random stored rows of any declaration -----------------------------------------------------


def _text():
    return st.one_of(
        st.text(max_size=12),
        st.sampled_from(TEXTS),
        st.text(min_size=GATHER_BYTES - 10, max_size=90),
    )


def _decimal(column_type):
    if column_type.scale is not None:
        whole = 10 ** (column_type.precision - column_type.scale) - 1
        return st.builds(
            lambda n, s: (
                f"{'-' if s and n else ''}{n // 10**column_type.scale}"
                f".{n % 10**column_type.scale:0{column_type.scale}d}"
            ),
            st.integers(0, (whole + 1) * 10**column_type.scale - 1),
            st.booleans(),
        )
    return st.from_regex(r"-?(0|[1-9][0-9]{0,24})(\.[0-9]{1,8})?", fullmatch=True)


def _value(column_type):
    kind = column_type.kind
    if kind == "integer":
        return st.integers(-(2**63), 2**63 - 1)
    if kind == "text":
        return _text()
    if kind == "decimal":
        return _decimal(column_type)
    if kind == "float":
        return st.floats(allow_nan=False, allow_infinity=False)
    if kind == "boolean":
        return st.booleans()
    if kind == "date":
        return st.dates().map(date.isoformat)
    return st.datetimes(timezones=st.just(UTC)).map(lambda t: t.isoformat(timespec="microseconds"))


def rows_of(spec, max_size: int = 25):
    columns = [st.none() | _value(c.type) if c.nullable else _value(c.type) for c in spec.columns]
    return st.lists(st.tuples(*columns), max_size=max_size)


def parsed(spec, row) -> dict:
    """A stored row as the declaration's parsed values, by column name (the test's own
    reading: what ``DailyFiles.matches`` compares)."""
    out = {}
    for column, value in zip(spec.columns, row, strict=True):
        kind = column.type.kind
        if value is not None and kind == "decimal":
            value = Decimal(value)
        elif value is not None and kind == "date":
            value = date.fromisoformat(value)
        elif value is not None and kind == "timestamp":
            value = datetime.fromisoformat(value)
        out[column.name] = value
    return out


# --- the rule, for every declaration -------------------------------------------------------------


def test_the_oracles_constants_are_the_modules():
    assert (plain.SEED, plain.TEXT_SEED, plain.M) == (digest.SEED, digest.TEXT_SEED, digest.M)
    for constant in ("0x243F6A8885A308D3", "0x13198A2E03707344", "0x9E3779B97F4A7C15"):
        assert constant in digest.__doc__  # the docstring states them: recomputable from it


@pytest.mark.parametrize("spec", TABLES.values(), ids=TABLES.keys())
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_row_hashes_and_batch_digest_are_the_rule_of_the_docstring(spec, data):
    rows = data.draw(rows_of(spec))
    assert row_hashes(table(spec, rows), spec).tolist() == [row_hash(spec, r) for r in rows]
    assert batch_digest(spec, rows) == plain_digest(spec, rows)
    if len(rows) > 2:
        assert batch_digest(spec, rows, chunked=2) == plain_digest(spec, rows)


@pytest.mark.parametrize("spec", TABLES.values(), ids=TABLES.keys())
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_day_checksums_are_the_sum_of_the_rule_whatever_the_batching(spec, data):
    rows = data.draw(rows_of(spec, max_size=40))
    days = data.draw(st.lists(st.integers(20470, 20475), min_size=len(rows), max_size=len(rows)))
    files = spec.daily_files[0]
    expected = plain_days(spec, rows, days, [files.matches(parsed(spec, r)) for r in rows])
    order = data.draw(st.permutations(range(len(rows))))
    for size in (1, 7, max(len(rows), 1)):
        got: dict[int, DayDigest] = {}
        for i in range(0, len(rows), size):
            part = order[i : i + size]
            add_days(got, table(spec, [rows[j] for j in part], [days[j] for j in part]), spec)
        assert got == expected


@pytest.mark.parametrize("order_id", [0, 1, -1, 2**62 + 7, -(2**63)])
def test_each_orders_row_hash_is_the_rule_of_the_docstring(order_id):
    rows = [(order_id, s, a, u) for s in TEXTS for a in ("40.00", "") for u in (STAMP, "x")]
    assert row_hashes(orders(rows), spec=ORDERS).tolist() == [row_hash(ORDERS, row) for row in rows]
    assert batch_digest(ORDERS, rows) == plain_digest(ORDERS, rows)


def test_each_payments_value_is_the_rule_of_the_docstring():
    """Every text of the edge list in each text column, NULL in each nullable one."""
    base = [7, 1, "captured", -250, "1.10", 0.5, "note", True, "2026-01-25", STAMP]
    rows = [base]
    for i, column in enumerate(PAYMENTS.columns):
        if column.type.kind == "text":
            rows += [base[:i] + [text] + base[i + 1 :] for text in TEXTS]
        if column.nullable:
            rows.append(base[:i] + [None] + base[i + 1 :])
    rows += [base[:5] + [rate] + base[6:] for rate in (-0.0, 0.0, 1e-05, 1e300, -2.5, 0.1)]
    rows += [base[:7] + [False] + base[8:], [-(2**63), 2**63 - 1, *base[2:]]]
    assert row_hashes(table(PAYMENTS, rows), PAYMENTS).tolist() == [
        row_hash(PAYMENTS, r) for r in rows
    ]
    assert batch_digest(PAYMENTS, rows) == plain_digest(PAYMENTS, rows)


# --- NULL, and what a value must never be taken for ---------------------------------------------

NOTE = 6  # payments.note: nullable text
BASE = (7, 1, "captured", 100, "1.10", 0.5, "", True, "2026-01-25", STAMP)


def _with(index: int, value) -> tuple:
    return BASE[:index] + (value,) + BASE[index + 1 :]


@pytest.mark.parametrize(
    "index,values",
    [
        (NOTE, ["", None, "\x1e", "\x1e\x1e", "\\N", "null"]),
        (5, [0.0, None, -0.5, 0.5]),  # rate: nullable float
        (8, [None, "1970-01-01", "2026-01-25"]),  # settle_on: nullable date
    ],
)
def test_null_differs_from_every_value_in_the_hash_and_the_digest(index, values):
    rows = [_with(index, v) for v in values]
    hashes = row_hashes(table(PAYMENTS, rows), PAYMENTS).tolist()
    assert len(set(hashes)) == len(rows)
    lines = [plain.digest_line(PAYMENTS, row) for row in rows]
    assert len(set(lines)) == len(rows)
    for row in rows:
        assert batch_digest(PAYMENTS, [row]) == plain_digest(PAYMENTS, [row])


def test_null_and_empty_text_hash_apart():
    empty, null = _with(NOTE, ""), _with(NOTE, None)
    got = row_hashes(table(PAYMENTS, [empty, null]), PAYMENTS).tolist()
    assert got == [row_hash(PAYMENTS, empty), row_hash(PAYMENTS, null)]
    assert got[0] != got[1]
    assert batch_digest(PAYMENTS, [empty]) != batch_digest(PAYMENTS, [null])


def test_minus_zero_is_zero():
    """-0.0 == 0.0 as values, so they hash and digest alike (a warehouse may store one as
    the other)."""
    rows = [_with(5, -0.0), _with(5, 0.0)]
    a, b = row_hashes(table(PAYMENTS, rows), PAYMENTS).tolist()
    assert a == b
    assert batch_digest(PAYMENTS, rows[:1]) == batch_digest(PAYMENTS, rows[1:])


@pytest.mark.parametrize(
    "spec,name",
    [
        (ORDERS, "status"),
        (ORDERS, "order_id"),
        (PAYMENTS, "fee"),
        (PAYMENTS, "refundable"),
        (PAYMENTS, "attempt"),
    ],
)
def test_null_in_a_column_not_declared_nullable(spec, name):
    """Never written (the batch digest of rows to write refuses it); stored only where a
    required column was declared after rows were, and then its row hashes apart from the
    same row holding any value, the zero of its type included, so verify names its day."""
    row = BASE if spec is PAYMENTS else (1, "paid", "1.00", STAMP)
    arrow = table(spec, [row])
    i = arrow.schema.get_field_index(name)
    kind = arrow.schema.field(name).type
    unfilled = arrow.set_column(i, name, pa.nulls(1, kind))
    with pytest.raises(ValueError, match=name):
        feed_batch_digest(hashlib.sha256(), unfilled, spec)
    zero = {pa.string(): "", pa.bool_(): False}.get(kind, 0)
    zeroed = arrow.set_column(i, name, pa.array([zero], kind))
    hashes = {row_hashes(t, spec)[0] for t in (arrow, zeroed, unfilled)}
    assert len(hashes) == 3


def test_a_row_hash_does_not_depend_on_its_neighbours():
    """Texts are gathered as blocks as wide as the longest in the batch, NULLs filled: a
    row alone and a row among longer ones and NULLs must hash the same."""
    alone = row_hashes(orders([(7, "paid", "1.00", STAMP)]), spec=ORDERS).tolist()
    among = row_hashes(
        orders([(7, "paid", "1.00", STAMP), (8, "z" * 90, "1" * 40, STAMP + "x")]), spec=ORDERS
    ).tolist()
    assert among[0] == alone[0]
    alone = row_hashes(table(PAYMENTS, [_with(NOTE, "n")]), PAYMENTS).tolist()
    among = row_hashes(
        table(PAYMENTS, [_with(NOTE, "n"), _with(NOTE, None), _with(NOTE, "w" * 200)]), PAYMENTS
    ).tolist()
    assert among[0] == alone[0]


def test_any_single_change_changes_the_hash():
    base = (101, "paid", "40.00", STAMP)
    variants = [
        (102, *base[1:]),
        (101, "paid ", "40.00", STAMP),
        (101, "paid", "40.0", STAMP),
        (101, "paid", "40.00", STAMP.replace("03", "04")),
        (101, "pai", "d40.00", STAMP),
    ]  # moving a byte across fields
    hashes = row_hashes(orders([base, *variants]), spec=ORDERS).tolist()
    assert len(set(hashes)) == len(hashes)
    variants = [
        _with(i, v)
        for i, v in [
            (0, 8),
            (1, 2),
            (2, "captured "),
            (3, 101),
            (4, "1.1"),
            (5, 0.5000000000000001),
            (6, " "),
            (7, False),
            (8, "2026-01-26"),
            (9, STAMP.replace("03", "04")),
        ]
    ]
    hashes = row_hashes(table(PAYMENTS, [BASE, *variants]), PAYMENTS).tolist()
    assert len(set(hashes)) == len(hashes)


# --- orders, exactly as before ------------------------------------------------------------------

PINNED_ROWS = [
    (1, "paid", "40.00", STAMP, 20478),
    (-5, "", "0", "2025-12-31T23:59:59.999999+00:00", 20453),
    (2**63 - 1, "ünïcødé " * 12, "-1234567.890", STAMP, 20478),
    (42, "refunded", "7.000", "2026-01-26T00:00:00.000000+00:00", 20479),
]


def test_orders_fingerprints_are_those_the_code_before_declarations_made():
    """Computed by digest.py as it was before it took a declaration: batch ids and the
    checksums of orders must not change across versions."""
    arrow = orders(PINNED_ROWS)
    assert [f"{h:016x}" for h in row_hashes(arrow, spec=ORDERS).tolist()] == [
        "f13d1496b6919894",
        "78b44575a5152608",
        "fd3da7b843bc6e6f",
        "fc240f88e334f3de",
    ]
    assert row_hashes(arrow, ORDERS).tolist() == row_hashes(arrow, spec=ORDERS).tolist()
    got: dict[int, DayDigest] = {}
    add_days(got, arrow, spec=ORDERS)
    assert got == {
        20453: DayDigest(1, 0x78B44575A5152608, 0),
        20478: DayDigest(2, 0xEE7ABC4EFA4E0703, 1),
        20479: DayDigest(1, 0xFC240F88E334F3DE, 0),
    }
    stored = [r[:4] for r in PINNED_ROWS]
    assert (
        batch_digest(ORDERS, stored)
        == "2e7bc16a17ae8745a00a09e87804f8fd2228cd03a4a6394dfc1f33adf8a23a99"
    )
    assert (
        batch_digest(ORDERS, stored[1:3])
        == "e1550fd697cf26a718d4b6787b314b1d9183c04a45e72e0d68d2f8777d4f8c5f"
    )
    h = hashlib.sha256()
    feed_batch_digest(h, orders(PINNED_ROWS), spec=ORDERS)  # the spec left out: orders
    assert h.hexdigest().startswith("2e7bc16a")
    assert plain.digest_line(ORDERS, stored[0]) == f"1\x1fpaid\x1f40.00\x1f{STAMP}\n".encode()


def test_orders_day_checksums_do_not_depend_on_batching_or_order():
    rng = random.Random(5)
    rows = [
        (
            n,
            rng.choice(TEXTS),
            f"{rng.randint(0, 99999) / 100:.2f}",
            STAMP,
            rng.randint(20470, 20480),
        )
        for n in range(2_000)
    ]
    expected = plain_days(
        ORDERS, [r[:4] for r in rows], [r[4] for r in rows], [r[1] == "paid" for r in rows]
    )
    for batch_size in (1, 7, 2_000):
        shuffled = rows[:]
        rng.shuffle(shuffled)
        got: dict[int, DayDigest] = {}
        for i in range(0, len(shuffled), batch_size):
            add_days(got, orders(shuffled[i : i + batch_size]), spec=ORDERS)
        assert got == expected


def test_days_far_apart_each_get_their_own_digest():
    """A stray year among recent days must not make a slot per day in between."""
    rows = [(1, "paid", "1.00", STAMP, 20_000), (2, "paid", "2.00", STAMP, -700_000)]
    got: dict[int, DayDigest] = {}
    add_days(got, orders(rows), spec=ORDERS)
    assert sorted(got) == [-700_000, 20_000]
    assert got[20_000] == DayDigest(1, row_hash(ORDERS, rows[0][:4]), 1)
    assert got[20_000].matching == 1


# --- the count of a daily file's rows ---------------------------------------------------------


def _files(*where) -> DailyFiles:
    return DailyFiles("f", tuple(where), PAYMENTS.column_names)


WHERES = [
    None,  # the spec's first daily file: status captured
    _files(("status", ("captured", "refunded"))),
    _files(("note", (None,))),
    _files(("note", ("", None))),
    _files(("rate", (0.0, 0.5))),  # -0.0 too: it equals 0.0
    _files(("fee", (Decimal("1.1"), Decimal("-3")))),  # numbers: "1.10" is 1.1
    _files(("refundable", (False,))),
    _files(("settle_on", (date(2026, 1, 25), None))),
    _files(("modified_at", (datetime(2026, 1, 25, 3, tzinfo=UTC),))),
    _files(("attempt", (1, 2, 3, 5, 8, 13))),  # more than a few values
    _files(("status", ("captured",)), ("refundable", (True,))),
    _files(),  # no filter: every row
]
FILTER_ROWS = [
    BASE,
    _with(2, "refunded"),
    _with(2, "failed"),
    _with(NOTE, None),
    _with(NOTE, "x"),
    _with(5, -0.0),
    _with(5, None),
    _with(5, 0.25),
    _with(4, "1.1"),
    _with(4, "-3.00"),
    _with(4, "-3.01"),
    _with(7, False),
    _with(8, None),
    _with(8, "2026-01-24"),
    _with(9, "2026-01-25T03:00:00.000001+00:00"),
    _with(1, 13),
    _with(1, 4),
    _with(1, -(2**63)),
]


@pytest.mark.parametrize(
    "files",
    WHERES,
    ids=lambda f: "default" if f is None else ",".join(c for c, _ in f.where) or "all",
)
def test_a_day_counts_the_rows_the_filter_keeps_as_the_declaration_reads_it(files):
    rows = FILTER_ROWS
    expected = [(files or PAYMENTS.daily_files[0]).matches(parsed(PAYMENTS, r)) for r in rows]
    assert any(expected) or files is not None
    arrow = table(PAYMENTS, rows, [20_000 + i % 3 for i in range(len(rows))])
    assert kept_rows(arrow, PAYMENTS, files).tolist() == expected
    got: dict[int, DayDigest] = {}
    add_days(got, arrow, PAYMENTS, files)
    assert got == plain_days(PAYMENTS, rows, [20_000 + i % 3 for i in range(len(rows))], expected)


def test_orders_count_paid_or_what_another_filter_keeps():
    rows = [
        (1, "paid", "1.00", STAMP, 1),
        (2, "refunded", "1.00", STAMP, 1),
        (3, "cancelled", "1.00", STAMP, 1),
        (4, "paid", "1.00", STAMP, 2),
    ]
    got: dict[int, DayDigest] = {}
    add_days(got, orders(rows), spec=ORDERS)
    assert [(d, got[d].rows, got[d].paid) for d in sorted(got)] == [(1, 3, 1), (2, 1, 1)]
    gone = DailyFiles("gone", (("status", ("refunded", "cancelled")),), ORDERS.column_names)
    got = {}
    add_days(got, orders(rows), ORDERS, gone)
    assert [(d, got[d].paid) for d in sorted(got)] == [(1, 2), (2, 0)]


def test_a_declaration_without_daily_files_counts_none():
    bare = dataclasses.replace(PAYMENTS, daily_files=())
    got: dict[int, DayDigest] = {}
    add_days(got, table(bare, [BASE], [5]), bare)
    assert got == {5: DayDigest(1, row_hash(bare, BASE), 0)}
