"""The per-row hash and the per-day checksums that ``orders_match_source`` and ``verify``
compare: computed over whole Arrow batches, they must equal the rule written out in
:mod:`pipeline_assets.core.digest`'s docstring, recomputed here in plain Python from that
text alone, on the texts where a vectorized version goes wrong first — empty, exactly one
word, one byte more, multi-byte UTF-8, longer than the gathered block — and a day's
checksum must not depend on how its rows are batched or ordered.
"""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from pipeline_assets.core.digest import (
    GATHER_BYTES,
    SEED,
    TEXT_SEED,
    DayDigest,
    M,
    add_days,
    row_hashes,
)

MASK = (1 << 64) - 1


def take(state: int, word: int) -> int:
    state = ((state ^ word) * M) & MASK
    return state ^ (state >> 32)


def text_hash(text: str) -> int:
    data = text.encode()
    state = take(TEXT_SEED, len(data))
    data += b"\0" * (-len(data) % 8)
    for i in range(0, len(data), 8):
        state = take(state, int.from_bytes(data[i:i + 8], "little"))
    return state


def finish(state: int) -> int:
    for factor in (0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53):
        state ^= state >> 33
        state = (state * factor) & MASK
    return state ^ (state >> 33)


def oracle(order_id: int, status: str, amount: str, updated_at: str) -> int:
    state = take(SEED, order_id & MASK)
    for text in (status, amount, updated_at):
        state = take(state, text_hash(text))
    return finish(state)


STAMP = "2026-01-25T03:00:00.000000+00:00"
TEXTS = ["", "p", "paid", "1234567", "12345678", "123456789", "x" * 16, "x" * 17,
         "ünïcødé", "€" * 3, "a\x00", "\x00", "x" * (GATHER_BYTES - 1), "x" * GATHER_BYTES,
         "y" * (GATHER_BYTES + 1), "z" * 300]


def table(rows: list[tuple]) -> pa.Table:
    order_id, status, amount, updated_at, *day = zip(*rows, strict=True)
    columns = {"order_id": pa.array(order_id, pa.int64()), "status": list(status),
               "amount": list(amount), "updated_at": list(updated_at)}
    if day:
        columns["day"] = pa.array(day[0], pa.int32())
    return pa.table(columns)


@pytest.mark.parametrize("order_id", [0, 1, -1, 2**62 + 7, -(2**63)])
def test_each_row_hash_is_the_rule_of_the_docstring(order_id):
    rows = [(order_id, s, a, u) for s in TEXTS for a in ("40.00", "") for u in (STAMP, "x")]
    assert row_hashes(table(rows)).tolist() == [oracle(*row) for row in rows]


def test_a_row_hash_does_not_depend_on_its_neighbours():
    """Texts are gathered as blocks as wide as the longest in the batch: a row alone and
    a row among longer ones must hash the same."""
    alone = row_hashes(table([(7, "paid", "1.00", STAMP)])).tolist()
    among = row_hashes(table([(7, "paid", "1.00", STAMP),
                              (8, "z" * 90, "1" * 40, STAMP + "x")])).tolist()
    assert among[0] == alone[0]


def test_any_single_change_changes_the_hash():
    base = (101, "paid", "40.00", STAMP)
    variants = [(102, *base[1:]), (101, "paid ", "40.00", STAMP), (101, "paid", "40.0", STAMP),
                (101, "paid", "40.00", STAMP.replace("03", "04")),
                (101, "pai", "d40.00", STAMP)]  # moving a byte across fields
    hashes = row_hashes(table([base, *variants])).tolist()
    assert len(set(hashes)) == len(hashes)


def test_day_checksums_do_not_depend_on_batching_or_order():
    rng = random.Random(5)
    rows = [(n, rng.choice(TEXTS), f"{rng.randint(0, 99999) / 100:.2f}", STAMP,
             rng.randint(20470, 20480)) for n in range(2_000)]
    expected: dict[int, DayDigest] = {}
    for order_id, status, amount, updated_at, day in rows:
        expected.setdefault(day, DayDigest()).add(
            1, oracle(order_id, status, amount, updated_at), status == "paid")
    for batch_size in (1, 7, 2_000):
        shuffled = rows[:]
        rng.shuffle(shuffled)
        got: dict[int, DayDigest] = {}
        for i in range(0, len(shuffled), batch_size):
            add_days(got, table(shuffled[i:i + batch_size]))
        assert got == expected


def test_days_far_apart_each_get_their_own_digest():
    """A stray year among recent days must not make a slot per day in between."""
    rows = [(1, "paid", "1.00", STAMP, 20_000), (2, "paid", "2.00", STAMP, -700_000)]
    got: dict[int, DayDigest] = {}
    add_days(got, table(rows))
    assert sorted(got) == [-700_000, 20_000]
    assert got[20_000] == DayDigest(1, oracle(1, "paid", "1.00", STAMP), 1)
