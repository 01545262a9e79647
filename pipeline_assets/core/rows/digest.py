"""The fingerprints of stored rows, computed over whole Arrow batches (never row by row).

A stored row holds the columns of a declared table
(:class:`~pipeline_assets.core.table.spec.TableSpec`) as the warehouse keeps them
(:meth:`~pipeline_assets.core.table.types.ColumnType.stored`), as Arrow columns: ``int64`` for
integer, ``float64`` for float, ``bool`` for boolean, and ``string`` for text, decimal (its exact
text), date (``YYYY-MM-DD``) and timestamp (canonical UTC text,
``2026-01-25T03:00:00.000000+00:00``); NULL in a column declared nullable, or in a required
column declared after rows were stored (the warehouse adds it empty until they are
filled). Every function takes the declaration as ``spec``,
:data:`~pipeline_assets.core.table.orders.ORDERS` (``order_id, status, amount, updated_at``) unless
told. Two fingerprints are made of a row, both going through its columns in declaration order:

- :func:`feed_batch_digest`: one line per row, in key order, fed to the batch's SHA-256:
  the content part of a batch id. For orders the line is
  ``order_id␟status␟amount␟updated_at\\n``, the digest batch ids have always had, so a
  batch keeps its id across versions.
- :func:`row_hashes`: a 64-bit hash of each row, and :func:`add_days`, which sums them
  per day (mod 2**64) with the day's row count and how many of its rows a daily file's
  filter keeps (for orders: the paid ones). A sum does not depend on the order of the
  rows, so the source and the warehouse can be read in any order, in batches of any
  size, and still give the same figure for the same rows: this is what
  ``orders_match_source`` and ``pipeline-assets verify`` compare, day by day.

Both rules, stated so that anyone can recompute them (the tests do, in plain Python,
with :mod:`pipeline_assets_tests.plain`):

**The batch-digest line** of a row is the UTF-8 encoding of its columns' texts joined by
``\\x1f`` (␟) and ended by ``\\n``. A column's text is: for integer, ``str(value)``
(decimal digits, ``-`` when negative); for text, decimal, date and timestamp, the stored
text itself; for float, ``repr(value)`` (Python's shortest round-trip form: ``1.0``,
``1e-05``, ``0.1``), ``-0.0`` written as ``0.0``; for boolean, ``true`` or ``false``; for
NULL, ``\\x1e`` (␞) alone, and in a nullable text column a value starting with ``\\x1e``
gets one more ``\\x1e`` in front, so that no value reads as NULL. Texts holding ``\\x1f``
or a newline are written as they are, as orders' always were, so the lines of two
batches could in theory be alike while their rows differ; SHA-256 over them cannot
otherwise be made to collide, and a batch id also names its window.

**The row hash.** Taking a 64-bit word ``w`` into a state ``s`` is
``s = (s XOR w) * M mod 2**64; s ^= s >> 32``, with ``M`` = :data:`M`
(``0x9E3779B97F4A7C15``). A text's hash starts at :data:`TEXT_SEED`
(``0x13198A2E03707344``), takes its UTF-8 byte length, then its bytes zero-padded to a
multiple of 8, as little-endian words. A row's state starts at :data:`SEED`
(``0x243F6A8885A308D3``) and takes, for each column, its value's word:

- integer: the value as a two's-complement 64-bit word (``value mod 2**64``);
- text, decimal, date, timestamp: the text hash of the stored text;
- float: the value's IEEE-754 binary64 bits read as an unsigned 64-bit word
  (``struct.unpack("<Q", struct.pack("<d", value))``), ``-0.0`` taken as ``0.0`` (they
  are equal values);
- boolean: 1 for true, 0 for false.

A nullable column takes two words instead of one: 1 then its value's word, or, when
NULL, 0 then 0; so a NULL differs from every value (``""``, ``0`` and ``false``
included). A column that is not nullable takes its one word (a NULL there, a row stored
before the column was declared and not filled yet, takes :data:`UNFILLED`, so the row
differs from the source's and its day is named), which is why orders' rows
hash as they always have: ``order_id``'s word, then the text hashes of ``status``,
``amount`` and ``updated_at``. The row's hash is MurmurHash3's 64-bit finalizer of the
state: ``s ^= s >> 33; s *= 0xFF51AFD7ED558CCD; s ^= s >> 33; s *= 0xC4CEB9FE1A85EC53;
s ^= s >> 33`` (mod 2**64).

It is no cryptographic hash: it tells rows apart that differ by accident (a missed row,
a changed amount), which is its job; anyone who can write the warehouse can make it say
anything anyway.

Each kind's text and word are its codec's (``digest_text``, ``hash_words``,
:mod:`~pipeline_assets.core.table.codecs`). It runs in NumPy on the Arrow buffers (and
:func:`feed_batch_digest` in Arrow's kernels), which release the GIL: a per-row Python
loop over a million rows costs seconds, these tens of milliseconds. Only a float
column's batch-digest text is made in Python, a value at a time (floats are rare in the
tables this copies).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..table import working
from ..table.spec import Column, DailyFiles, TableSpec
from ..table.types import ColumnType

SEED = 0x243F6A8885A308D3  # hex digits of pi's fraction: nothing up the sleeve
TEXT_SEED = 0x13198A2E03707344  # the next sixteen of them
M = 0x9E3779B97F4A7C15  # 2**64 / golden ratio, odd
_MASK = (1 << 64) - 1
UNFILLED = 0x082EFA98EC4E6C89  # a NULL's word in a required column: pi's hex digits further on
GATHER_BYTES = 64  # texts up to this long are hashed as a block; longer ones one by one
NULL_TEXT = "\x1e"  # a NULL in a batch-digest line


@dataclass
class DayDigest:
    """One day of one side: how many rows, the sum of their hashes, and how many of them
    a daily file's filter keeps (``paid``, the name it had when that file was orders'
    paid orders; :attr:`matching` is the same count)."""

    rows: int = 0
    checksum: int = 0  # sum of row_hashes mod 2**64
    paid: int = 0

    @property
    def matching(self) -> int:
        return self.paid

    def add(self, rows: int, checksum: int, paid: int) -> None:
        self.rows += rows
        self.checksum = (self.checksum + checksum) & _MASK
        self.paid += paid


def feed_batch_digest(digest: hashlib._Hash, table: pa.Table, spec: TableSpec) -> None:
    """Feed the stored rows of ``table`` to a batch's digest: a line per row (see the
    module docstring; ``id␟status␟amount␟updated_at\\n`` for orders)."""
    if table.num_rows == 0:
        return
    fields = [_text(table[column.name], column) for column in spec.columns]
    fields[-1] = pc.binary_join_element_wise(fields[-1], "\n", "")
    lines = pc.binary_join_element_wise(*fields, "\x1f") if len(fields) > 1 else fields[0]
    for chunk in lines.chunks if isinstance(lines, pa.ChunkedArray) else [lines]:
        if len(chunk) == 0:
            continue
        offsets = memoryview(chunk.buffers()[1]).cast("i")  # int32 offsets of a string array
        digest.update(
            memoryview(chunk.buffers()[2])[
                offsets[chunk.offset] : offsets[chunk.offset + len(chunk)]
            ]
        )


def _check_nulls(values, column: Column) -> None:
    if values.null_count and not column.nullable:
        raise ValueError(f"a {column.name} to write is NULL, and its column is not nullable")


def _text(values, column: Column):
    """A column's batch-digest texts (its codec's), NULL as :data:`NULL_TEXT`."""
    _check_nulls(values, column)
    kind = column.type
    texts = kind.codec.digest_text(kind, values)
    if column.nullable and kind.codec.any_text:  # a value may start with it
        texts = pc.replace_substring_regex(texts, f"^{NULL_TEXT}", NULL_TEXT * 2)
    if values.null_count:
        texts = pc.fill_null(texts, NULL_TEXT)
    return texts


def _take(state: np.ndarray, word: np.ndarray) -> np.ndarray:
    state = (state ^ word) * np.uint64(M)  # uint64 arrays wrap mod 2**64, as the rule says
    return state ^ (state >> np.uint64(32))


def _finish(state: np.ndarray) -> np.ndarray:
    state = state ^ (state >> np.uint64(33))
    state = state * np.uint64(0xFF51AFD7ED558CCD)
    state = state ^ (state >> np.uint64(33))
    state = state * np.uint64(0xC4CEB9FE1A85EC53)
    return state ^ (state >> np.uint64(33))


def _one_text(data: bytes) -> int:
    """:func:`text_hashes` of one text, in plain Python (the texts too long to gather)."""
    state = np.array([TEXT_SEED], np.uint64)
    state = _take(state, np.array([len(data)], np.uint64))
    padded = data + b"\0" * (-len(data) % 8)
    for word in np.frombuffer(padded, "<u8"):
        state = _take(state, np.array([word], np.uint64))
    return int(state[0])


def text_hashes(column) -> np.ndarray:
    """The hash of every text of a string column: its byte length, then its words."""
    text = _flat(column).cast(pa.string())
    n = len(text)
    if text.null_count:
        raise ValueError("a stored text is NULL")  # fill NULLs first (row_hashes does)
    _, offsets_buffer, data_buffer = text.buffers()
    offsets = np.frombuffer(offsets_buffer, np.int32)[text.offset : text.offset + n + 1]
    data = (
        np.frombuffer(data_buffer, np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
    )
    lengths = (offsets[1:] - offsets[:-1]).astype(np.int64)
    state = _take(np.full(n, TEXT_SEED, np.uint64), lengths.astype(np.uint64))
    longest = int(lengths.max()) if n else 0
    if longest == 0:
        return state
    width = (min(longest, GATHER_BYTES) + 7) // 8 * 8
    first = int(offsets[0])
    if int(lengths.min()) == longest == width:  # one width, no padding (a canonical stamp)
        words = data[first : first + n * width].view("<u8").reshape(n, width // 8)
        for k in range(width // 8):
            state = _take(state, words[:, k])
        return state
    # every 8 bytes from every position, as one strided view; a row's k-th word is the
    # 8 bytes at its offset + 8k, with the bytes past its end masked to zero
    padded = np.concatenate([data[first : int(offsets[-1])], np.zeros(width, np.uint8)])
    windows = np.lib.stride_tricks.as_strided(padded, (len(padded) - 7, 8), (1, 1))
    starts = (offsets[:-1] - first).astype(np.int64)
    shortest = int(lengths.min())
    for k in range(width // 8):
        left = lengths - 8 * k  # bytes of the row from this word on
        word = np.ascontiguousarray(windows[starts + 8 * k]).view("<u8")[:, 0]
        keep = np.where(
            left >= 8,
            np.uint64(_MASK),
            (np.uint64(1) << (8 * np.clip(left, 0, 7)).astype(np.uint64)) - np.uint64(1),
        )
        taken = _take(state, word & keep)
        state = taken if shortest > 8 * k else np.where(left > 0, taken, state)
    if longest > GATHER_BYTES:
        for i in np.flatnonzero(lengths > GATHER_BYTES):
            state[i] = _one_text(bytes(data[offsets[i] : offsets[i + 1]]))
    return state


def value_words(values, kind: ColumnType) -> np.ndarray:
    """The word of every value of a column of type ``kind`` (NULLs must be filled): its
    codec's, or the hash of its stored text."""
    words = kind.codec.hash_words(kind, values)
    return text_hashes(values) if words is None else words


def row_hashes(table: pa.Table, spec: TableSpec) -> np.ndarray:
    """The 64-bit hash of every stored row of ``table`` (see the module docstring)."""
    state = np.full(table.num_rows, SEED, np.uint64)
    for column in spec.columns:
        values = _flat(table[column.name])
        kind = column.type
        if not column.nullable:
            if values.null_count:  # declared after rows were stored, not filled yet
                words = value_words(pc.fill_null(values, kind.codec.zero), kind)
                unfilled = np.asarray(values.is_null())
                state = _take(state, np.where(unfilled, np.uint64(UNFILLED), words))
            else:
                state = _take(state, value_words(values, kind))
            continue
        present = np.asarray(values.is_valid())  # NULL: 0 then 0; a value: 1 then its word
        if values.null_count:
            values = pc.fill_null(values, kind.codec.zero)
        state = _take(state, present.astype(np.uint64))
        state = _take(state, np.where(present, value_words(values, kind), np.uint64(0)))
    return _finish(state)


def kept_rows(table: pa.Table, spec: TableSpec, files: DailyFiles | None = None) -> np.ndarray:
    """Which rows of ``table`` the filter of ``files`` keeps, as a NumPy bool array:
    every ``where`` column holds one of its allowed (parsed) values, compared as the
    declaration's :class:`~pipeline_assets.core.table.spec.DailyFiles.matches` compares them
    (decimals and floats as numbers, NULL where None is allowed). ``files`` defaults to the spec's
    first daily file (orders: status ``paid``); a spec without one keeps no row."""
    if files is None:
        if not spec.daily_files:
            return np.zeros(table.num_rows, bool)
        files = spec.daily_files[0]
    keep = None
    for name, allowed in files.where:
        hit = _allowed(_flat(table[name]), spec.column(name).type, allowed)
        keep = hit if keep is None else pc.and_(keep, hit)
    if keep is None:
        return np.ones(table.num_rows, bool)
    return np.asarray(pc.fill_null(keep, False))


def _allowed(values: pa.Array, column_type: ColumnType, allowed: Sequence) -> pa.Array:
    """Whether each value is one of ``allowed`` (parsed values; None: NULL), or NULL."""
    wanted = [v for v in allowed if v is not None]
    hit = column_type.codec.equal_array(column_type, values, wanted) if wanted else None
    if len(wanted) < len(allowed):
        hit = values.is_null() if hit is None else pc.or_kleene(hit, values.is_null())
    return hit


def add_days(
    into: dict[int, DayDigest],
    table: pa.Table,
    spec: TableSpec,
    files: DailyFiles | None = None,
) -> None:
    """Add the rows of ``table`` (the spec's stored columns and ``day``, days since
    1970-01-01) to their days' digests in ``into``; a digest's ``paid`` counts the rows
    :func:`kept_rows` keeps (``files``, by default the spec's first daily file: for
    orders, the paid ones)."""
    if table.num_rows == 0:
        return
    hashes = row_hashes(table, spec)
    days = np.asarray(pc.cast(_flat(table[working.DAY]), pa.int64()))
    paid = kept_rows(table, spec, files)
    low, high = int(days.min()), int(days.max())
    if high - low < 4 * len(days):  # a few months of days: count straight into slots
        slots, slot = low + np.arange(high - low + 1), days - low
    else:  # a stray year among them: only the days present get a slot
        slots, slot = np.unique(days, return_inverse=True)
    sums = np.zeros(len(slots), np.uint64)
    np.add.at(sums, slot, hashes)  # uint64: the sum wraps mod 2**64, as a checksum should
    rows = np.bincount(slot, minlength=len(slots))
    paids = np.bincount(slot, weights=paid, minlength=len(slots))
    for i in np.flatnonzero(rows):
        into.setdefault(int(slots[i]), DayDigest()).add(int(rows[i]), int(sums[i]), int(paids[i]))


def _flat(column) -> pa.Array:
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
