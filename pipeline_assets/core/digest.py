"""The fingerprints of stored rows, computed over whole Arrow batches (never row by row).

A stored row is ``(order_id, status, amount, updated_at)`` as the warehouse keeps it
(exact amount text, canonical UTC timestamp text). Two fingerprints are made of it:

- :func:`feed_batch_digest`: the bytes ``order_id␟status␟amount␟updated_at\\n`` of every
  row, in key order, fed to the batch's SHA-256: the content part of a batch id. It is
  the digest batch ids have always had, so a batch keeps its id across versions.
- :func:`row_hashes`: a 64-bit hash of each row, and :func:`add_days`, which sums them
  per day (mod 2**64) with the day's row count and paid count. A sum does not depend
  on the order of the rows, so the source and the warehouse can be read in any order,
  in batches of any size, and still give the same figure for the same rows: this is
  what ``orders_match_source`` and ``pipeline-assets verify`` compare, day by day.

The row hash, stated so that anyone can recompute it (the tests do, in plain Python):
taking a 64-bit word ``w`` into a state ``s`` is ``s = (s XOR w) * M mod 2**64; s ^= s >> 32``.
A text's hash starts at :data:`TEXT_SEED`, takes its UTF-8 byte length, then its bytes
zero-padded to a multiple of 8, as little-endian words. A row's state starts at
:data:`SEED`, takes ``order_id`` as a two's-complement 64-bit word, then the text hashes
of ``status``, ``amount`` and ``updated_at``; its hash is MurmurHash3's 64-bit finalizer
of that state. It is no cryptographic hash: it tells rows apart that differ by accident
(a missed row, a changed amount), which is its job; anyone who can write the warehouse
can make it say anything anyway.

It runs in NumPy on the Arrow buffers (and :func:`feed_batch_digest` in Arrow's kernels),
which release the GIL: a per-row Python loop over a million rows costs seconds, these
tens of milliseconds.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .rows import PAID

SEED = 0x243F6A8885A308D3  # hex digits of pi's fraction: nothing up the sleeve
TEXT_SEED = 0x13198A2E03707344  # the next sixteen of them
M = 0x9E3779B97F4A7C15  # 2**64 / golden ratio, odd
_MASK = (1 << 64) - 1
TEXT_FIELDS = ("status", "amount", "updated_at")
GATHER_BYTES = 64  # texts up to this long are hashed as a block; longer ones one by one


@dataclass
class DayDigest:
    """One day of one side: how many rows, the sum of their hashes, how many are paid."""

    rows: int = 0
    checksum: int = 0  # sum of row_hashes mod 2**64
    paid: int = 0

    def add(self, rows: int, checksum: int, paid: int) -> None:
        self.rows += rows
        self.checksum = (self.checksum + checksum) & _MASK
        self.paid += paid


def feed_batch_digest(digest: hashlib._Hash, table: pa.Table) -> None:
    """Feed the stored rows to a batch's digest: ``id␟status␟amount␟updated_at\\n`` each."""
    if table.num_rows == 0:
        return
    lines = pc.binary_join_element_wise(
        pc.cast(table["order_id"], pa.string()), table["status"], table["amount"],
        pc.binary_join_element_wise(table["updated_at"], "\n", ""), "\x1f")
    for chunk in (lines.chunks if isinstance(lines, pa.ChunkedArray) else [lines]):
        if len(chunk) == 0:
            continue
        offsets = memoryview(chunk.buffers()[1]).cast("i")  # int32 offsets of a string array
        digest.update(memoryview(chunk.buffers()[2])[offsets[chunk.offset]:
                                                     offsets[chunk.offset + len(chunk)]])


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
        raise ValueError("a stored text is NULL")  # the warehouse's columns are NOT NULL
    _, offsets_buffer, data_buffer = text.buffers()
    offsets = np.frombuffer(offsets_buffer, np.int32)[text.offset:text.offset + n + 1]
    data = np.frombuffer(data_buffer, np.uint8) if data_buffer is not None \
        else np.zeros(0, np.uint8)
    lengths = (offsets[1:] - offsets[:-1]).astype(np.int64)
    state = _take(np.full(n, TEXT_SEED, np.uint64), lengths.astype(np.uint64))
    longest = int(lengths.max()) if n else 0
    if longest == 0:
        return state
    width = (min(longest, GATHER_BYTES) + 7) // 8 * 8
    first = int(offsets[0])
    if int(lengths.min()) == longest == width:  # one width, no padding (a canonical stamp)
        words = data[first:first + n * width].view("<u8").reshape(n, width // 8)
        for k in range(width // 8):
            state = _take(state, words[:, k])
        return state
    # every 8 bytes from every position, as one strided view; a row's k-th word is the
    # 8 bytes at its offset + 8k, with the bytes past its end masked to zero
    padded = np.concatenate([data[first:int(offsets[-1])], np.zeros(width, np.uint8)])
    windows = np.lib.stride_tricks.as_strided(padded, (len(padded) - 7, 8), (1, 1))
    starts = (offsets[:-1] - first).astype(np.int64)
    shortest = int(lengths.min())
    for k in range(width // 8):
        left = lengths - 8 * k  # bytes of the row from this word on
        word = np.ascontiguousarray(windows[starts + 8 * k]).view("<u8")[:, 0]
        keep = np.where(left >= 8, np.uint64(_MASK),
                        (np.uint64(1) << (8 * np.clip(left, 0, 7)).astype(np.uint64))
                        - np.uint64(1))
        taken = _take(state, word & keep)
        state = taken if shortest > 8 * k else np.where(left > 0, taken, state)
    if longest > GATHER_BYTES:
        for i in np.flatnonzero(lengths > GATHER_BYTES):
            state[i] = _one_text(bytes(data[offsets[i]:offsets[i + 1]]))
    return state


def row_hashes(table: pa.Table) -> np.ndarray:
    """The 64-bit hash of every stored row of ``table`` (see the module docstring)."""
    ids = np.asarray(pc.cast(_flat(table["order_id"]), pa.int64())).view(np.uint64)
    state = _take(np.full(len(ids), SEED, np.uint64), ids)
    for name in TEXT_FIELDS:
        state = _take(state, text_hashes(table[name]))
    return _finish(state)


def add_days(into: dict[int, DayDigest], table: pa.Table) -> None:
    """Add the rows of ``table`` (stored columns and ``day``, days since 1970-01-01) to
    their days' digests in ``into``."""
    if table.num_rows == 0:
        return
    hashes = row_hashes(table)
    days = np.asarray(pc.cast(_flat(table["day"]), pa.int64()))
    paid = np.asarray(pc.fill_null(pc.equal(_flat(table["status"]), PAID), False))
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
        into.setdefault(int(slots[i]), DayDigest()).add(int(rows[i]), int(sums[i]),
                                                         int(paids[i]))


def _flat(column) -> pa.Array:
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
