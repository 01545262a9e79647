"""The Arrow side of a day file's bytes: :class:`DayFileHashes`, the sha256 of the bytes
:func:`~.serialize.serialize_day` gives each day, built from Arrow tables of stored rows
by Arrow's kernels (what ``verify`` checks a year of files with).

Below it, its helpers per column type: the one Arrow form a stored column is written
from, which rows hold one of a ``where``'s values, each value's JSON text, and the rows
it cannot vouch for (whose day then gets no hash, and is built the slow way). A property
test holds it to :func:`~.serialize.serialize_day`, byte for byte
(``pipeline_assets_tests/test_day_views.py``).
"""

from __future__ import annotations

import hashlib
import json

from ..table import working
from ..table.spec import DailyFiles, TableSpec
from ..table.types import ColumnType
from .serialize import file_of

# The characters json.dumps(ensure_ascii=True) writes as they are: printable ASCII but the
# quote and the backslash. Text of only these is quoted as it is; the rest is escaped.


class DayFileHashes:
    """The sha256 of the bytes :func:`serialize_day` gives each of ``days`` (day numbers:
    days since 1970-01-01), from Arrow tables of stored rows fed in primary-key order,
    batch after batch: the same bytes, built by Arrow's kernels and hashed as they come
    (nothing held but a hash per day), so ``verify`` checks a year of files at the speed
    of one scan.

    ``spec`` and ``files`` say which file (default: ``orders``' ``paid_orders``). Each
    table given to :meth:`add` holds, by column name, every column of the file and of its
    ``where``, as the warehouse stores them (:meth:`.types.ColumnType.stored`): integers
    as integers; text as text; decimals as exact text; floats as floats; booleans as
    booleans (or 0/1); dates as ``YYYY-MM-DD`` text (or Arrow dates); timestamps as
    canonical UTC text (or Arrow timestamps, naive ones read as UTC); NULL as null. Plus
    ``day``: the day the row belongs to in the pipeline's zone, as days since 1970-01-01
    (int32). Other columns are ignored. For ``orders``: ``order_id``, ``status``,
    ``amount``, ``updated_at`` (canonical UTC text) and ``day``.

    Each object's JSON text is built per column type, keys in sorted order as
    ``json.dumps(sort_keys=True)`` writes them; text that JSON escapes (quotes,
    backslashes, control characters, non-ASCII) is escaped by ``json.dumps`` itself,
    value by value, and floats are written by it too. A day holding a row this cannot
    vouch for (a value :func:`serialize_day` would refuse or write otherwise, such as an
    amount ``1e3``) gets no hash: the caller builds that day's bytes the slow way, and
    words the error.
    """

    def __init__(self, days, tz, spec: TableSpec, files: DailyFiles | None = None):
        import pyarrow as pa

        self.tz = tz
        self.spec = spec
        self.files = file_of(spec, files)
        self._hashes = {day: [hashlib.sha256(), 0] for day in days}
        self._wanted = pa.array(sorted(self._hashes), pa.int32())
        self._unsure: set[int] = set()
        filtered = [column for column, _ in self.files.where]
        self._needed = list(dict.fromkeys([*self.files.columns, *filtered]))
        self._slot = {name: f"c{i}" for i, name in enumerate(self._needed)}

    def add(self, table) -> None:
        """Hash the rows of ``table`` (see the class) on the days asked and in the file's
        view, each day's after what that day already holds."""
        import pyarrow.compute as pc

        rows, bad = self._view_rows(table)
        if rows is None:
            return
        text, bad = self._row_texts(rows, bad)
        if bad is not None:
            bad = pc.fill_null(bad, True)
            if pc.any(bad).as_py():
                self._unsure |= set(pc.unique(rows["day"].filter(bad)).to_pylist())
        self._hash_days(rows["day"].to_numpy(), text)

    def _view_rows(self, table):
        """(the rows of the view on the days asked, each column in the one Arrow form it is
        written from, sorted by day and key; the rows it cannot vouch for or None), or
        (None, None) when there is no such row."""
        import pyarrow as pa
        import pyarrow.compute as pc

        spec, slot = self.spec, self._slot
        keep = pc.is_in(table[working.DAY], value_set=self._wanted)
        for name, allowed in self.files.where:  # the view's rows: compared as stored
            kind = spec.column(name).type
            keep = pc.and_(keep, allowed_rows(stored_array(table[name], kind)[0], kind, allowed))
        if not pc.any(keep).as_py():
            return None, None
        table = table.filter(keep)
        columns, bad = {"day": table[working.DAY]}, None
        for name in self._needed:
            array, wrong = stored_array(table[name], spec.column(name).type)
            columns[slot[name]] = array
            bad = either(bad, wrong)
        if bad is not None:
            columns["bad"] = bad
        rows = (
            pa.table(columns)
            .sort_by([("day", "ascending"), *((slot[k], "ascending") for k in spec.primary_key)])
            .combine_chunks()
        )
        return rows, (rows["bad"].combine_chunks() if bad is not None else None)

    def _row_texts(self, rows, bad):
        """(each row's JSON object, keys sorted, as text; ``bad`` with the rows whose values
        it cannot vouch for added)."""
        import pyarrow.compute as pc

        parts: list = []
        for i, name in enumerate(sorted(self.files.columns)):
            column = self.spec.column(name)
            parts.append(("{" if i == 0 else ",") + json.dumps(name) + ":")
            pieces, wrong = _json_text(
                rows[self._slot[name]].combine_chunks(), column.type, column.nullable, self.tz
            )
            parts.extend(pieces)
            bad = either(bad, wrong)
        parts.append("}")
        merged: list = []  # neighbouring literals joined: fewer arrays for the kernel
        for part in parts:
            if isinstance(part, str) and merged and isinstance(merged[-1], str):
                merged[-1] += part
            else:
                merged.append(part)
        return pc.binary_join_element_wise(*merged, ""), bad

    def _hash_days(self, day, text) -> None:
        """Feed each day's run of row texts (``day``: each row's day, sorted) to its hash,
        comma-joined, after an opening ``[`` or the day's rows so far."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        cut = np.flatnonzero(np.diff(day)) + 1
        starts = np.concatenate(([0], cut))
        offsets = pa.array(np.concatenate((starts, [len(day)])), pa.int32())
        lists = pa.ListArray.from_arrays(
            offsets, text.combine_chunks() if isinstance(text, pa.ChunkedArray) else text
        )
        counts = np.diff(offsets.to_numpy()).tolist()
        for start, count, joined in zip(
            starts.tolist(), counts, pc.binary_join(lists, ",").to_pylist(), strict=True
        ):
            state = self._hashes[int(day[start])]
            state[0].update(("," if state[1] else "[").encode("ascii") + joined.encode("ascii"))
            state[1] += count

    def result(self) -> dict[int, tuple[int, str]]:
        """``{day: (rows, sha256 hex)}`` for every day it can vouch for."""
        out = {}
        for day, (digest, rows) in self._hashes.items():
            if day in self._unsure:
                continue
            digest = digest.copy()
            digest.update(b"]\n" if rows else b"[]\n")
            out[day] = (rows, digest.hexdigest())
        return out


# --- the Arrow side, per column type --------------------------------------------------------


def either(a, b):
    import pyarrow.compute as pc

    if a is None:
        return b
    return a if b is None else pc.or_(a, b)


def stored_array(array, kind: ColumnType):
    """(the column in the one Arrow form it is written from, rows it cannot vouch for or
    None): its codec's :meth:`~pipeline_assets.core.table.codecs.base.Codec.file_array`."""
    import pyarrow as pa

    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    return kind.codec.file_array(kind, array)


def allowed_rows(array, kind: ColumnType, allowed: tuple):
    """Which rows hold one of a ``where``'s values (compared as the warehouse stores them)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    values = [kind.codec.arrow_stored(kind, v) for v in allowed if v is not None]
    match = pc.fill_null(pc.is_in(array, value_set=pa.array(values, array.type)), False)
    if None in allowed:
        match = pc.or_(match, pc.is_null(array))
    return match


def _json_text(array, kind: ColumnType, nullable: bool, tz) -> tuple[list, object]:
    """(the pieces of each row's JSON value: literals and arrays, rows it cannot vouch
    for or None), for a column in the form :func:`stored_array` gives."""
    import pyarrow.compute as pc

    text, bad, quoted = kind.codec.file_text(kind, array, tz)
    if array.null_count:
        if quoted:
            text, quoted = pc.binary_join_element_wise('"', text, '"', ""), False
        if not nullable:
            bad = either(bad, pc.is_null(array))
        text = pc.fill_null(text, "null")
    if bad is not None and pc.any(bad).as_py():
        text = pc.if_else(bad, "null", text)  # the day is not vouched for: keep kernels quiet
    return (['"', text, '"'] if quoted else [text]), bad
