"""Compared rows, counted per day into :class:`~.counts.DayCounts`, for both comparisons
of :mod:`.compare`: :func:`day_counts` of two digests, :func:`show_deleted` (the first keys
of each day's deleted rows), and :class:`Merge`, what ``verify``'s match by key finds,
accumulated run of keys by run of keys (rows not loaded, changed, only in the warehouse).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from ..rows.digest import DayDigest, add_days, kept_rows
from ..rows.keys import key_values, member
from ..table import working
from ..table.spec import TableSpec
from ..times.arrays import day_text
from .counts import DayCounts

DELETED_IDS_SHOWN = 5  # per day, in messages


def day_counts(
    source: dict[int, DayDigest], warehouse: dict[int, DayDigest]
) -> dict[str, DayCounts]:
    """The day counts of two digests, for every day with a row on either side."""
    out = {}
    for number in sorted(set(source) | set(warehouse)):
        s, w = source.get(number, DayDigest()), warehouse.get(number, DayDigest())
        day = day_text(number)
        out[day] = DayCounts(day, s.rows, s.checksum, s.paid, w.rows, w.checksum, w.paid)
    return out


def show_deleted(shown: dict[int, list], gone: pa.Table, spec: TableSpec) -> None:
    """Add the first :data:`DELETED_IDS_SHOWN` keys of each day of ``gone`` to ``shown``."""
    for number in pc.unique(gone[working.DAY]).to_pylist():
        keys = shown.setdefault(number, [])
        if len(keys) < DELETED_IDS_SHOWN:
            on_day = gone.filter(pc.equal(gone[working.DAY], number))
            keys.extend(key_values(on_day.slice(0, DELETED_IDS_SHOWN - len(keys)), spec))


_DAY_FILED = [working.DAY, working.FILED]  # a row's day, and whether a daily file keeps it


class Merge:
    """What the matched rows say, accumulated run of keys by run of keys."""

    def __init__(self, spec: TableSpec, lacking: tuple[str, ...] = ()):
        self.spec = spec
        self.lacking = lacking
        self.lacks: dict[tuple[int, str], int] = {}  # (warehouse day, column): rows
        self.source: dict[int, DayDigest] = {}
        self.warehouse: dict[int, DayDigest] = {}
        self.source_rows = self.warehouse_rows = 0
        self.not_loaded: dict[tuple[int, bool], int] = {}  # (day, in a file): rows
        self.gone: dict[tuple[int, bool], int] = {}  # (day, in a file): only in the warehouse
        self.gone_ids: dict[int, list] = {}  # day: the first few of them
        self.gone_sums: dict[int, DayDigest] = {}
        self.changed: dict[tuple[int, int, bool, bool], int] = {}  # (s day, w day, in a file…)
        self.kept: dict[tuple[str, int], int] = {}  # (daily file after the first, day): rows

    def add(self, s: pa.Table, w: pa.Table) -> None:
        """One run of keys: both sides hold every row of theirs with a key in it."""
        spec = self.spec
        add_days(self.source, s, spec)
        add_days(self.warehouse, w, spec)
        self._count_kept(w)
        self.source_rows += s.num_rows
        self.warehouse_rows += w.num_rows
        s_both, w_both = member(s, w, spec), member(w, s, spec)
        _tally(self.not_loaded, _with_filed(s.filter(pc.invert(s_both)), spec), _DAY_FILED)
        gone = w.filter(pc.invert(w_both))
        if gone.num_rows:
            _tally(self.gone, _with_filed(gone, spec), _DAY_FILED)
            add_days(self.gone_sums, gone, spec)
            show_deleted(self.gone_ids, gone, spec)
        # both sides are sorted by key and unique: the rows they share line up one to one
        s_pair, w_pair = s.filter(s_both), w.filter(w_both)
        for column in self.lacking:
            lacks = pc.and_(pc.is_null(w_pair[column]), pc.is_valid(s_pair[column]))
            if pc.any(lacks).as_py():
                on = w_pair.filter(lacks).append_column(
                    working.COLUMN, pa.array([column] * pc.sum(lacks).as_py(), pa.string())
                )
                _tally(self.lacks, on, [working.DAY, working.COLUMN])
        differ = _differ(s_pair, w_pair, spec)
        if differ is not None and pc.any(differ).as_py():
            s_pair, w_pair = s_pair.filter(differ), w_pair.filter(differ)
            pairs = pa.table(  # working columns only: no declared name among them
                {
                    "s_day": s_pair[working.DAY],
                    "w_day": w_pair[working.DAY],
                    "s_filed": _filed(s_pair, spec),
                    "w_filed": _filed(w_pair, spec),
                }
            )
            _tally(self.changed, pairs, ["s_day", "w_day", "s_filed", "w_filed"])

    def _count_kept(self, w: pa.Table) -> None:
        for files in self.spec.daily_files[1:]:
            if w.num_rows:
                kept = w.filter(pa.array(kept_rows(w, self.spec, files)))
                _tally(
                    self.kept,
                    kept.append_column(
                        working.FILE, pa.array([files.name] * kept.num_rows, pa.string())
                    ),
                    [working.FILE, working.DAY],
                )

    def days(self) -> dict[str, DayCounts]:
        days = day_counts(self.source, self.warehouse)

        def at(number: int) -> DayCounts:
            return days.setdefault(day_text(number), DayCounts(day_text(number)))

        for (number, paid), rows in self.not_loaded.items():
            counts = at(number)
            counts.not_loaded += rows
            counts.load_days.add(counts.day)
            if paid:
                counts.rebuild_days.add(counts.day)
        for (number, paid), rows in self.gone.items():  # a range load of the day deletes them
            counts = at(number)
            counts.only_in_warehouse += rows
            counts.load_days.add(counts.day)
            if paid:
                counts.rebuild_days.add(counts.day)
        for number, shown in self.gone_ids.items():
            at(number).deleted_ids = shown
            at(number).deleted_checksum = self.gone_sums[number].checksum
        for (s_day, w_day, s_paid, w_paid), rows in self.changed.items():
            # the file of a day changes where a row of a daily file arrives or leaves
            files = {day_text(d) for d, paid in ((s_day, s_paid), (w_day, w_paid)) if paid}
            for number in {s_day, w_day}:
                counts = at(number)
                counts.changed += rows
                counts.load_days.add(day_text(s_day))
                counts.rebuild_days.update(files)
        for (name, number), rows in self.kept.items():
            at(number).warehouse_kept[name] = rows
        for (number, column), rows in self.lacks.items():
            at(number).lacking[column] = rows
        return dict(sorted(days.items()))


def _filed(rows: pa.Table, spec: TableSpec) -> pa.Array:
    """Whether each row belongs to one of ``spec``'s daily files (orders: is paid)."""
    kept = None
    for files in spec.daily_files:
        hit = kept_rows(rows, spec, files)
        kept = hit if kept is None else kept | hit
    return pa.array(kept if kept is not None else [False] * rows.num_rows, pa.bool_())


def _with_filed(rows: pa.Table, spec: TableSpec) -> pa.Table:
    return rows.append_column(working.FILED, _filed(rows, spec)) if rows.num_rows else rows


def _differ(s: pa.Table, w: pa.Table, spec: TableSpec) -> pa.Array | None:
    """Whether each pair of rows (same key) differs in a stored value (NULL = NULL)."""
    differ = None
    for column in spec.columns:
        if column.name in spec.primary_key:
            continue
        apart = pc.not_equal(s[column.name], w[column.name])
        if column.nullable:
            apart = pc.fill_null(apart, True)
            both_null = pc.and_(pc.is_null(s[column.name]), pc.is_null(w[column.name]))
            apart = pc.and_(apart, pc.invert(both_null))
        differ = apart if differ is None else pc.or_(differ, apart)
    return differ


def _tally(into: dict, rows: pa.Table, keys: list[str]) -> None:
    """Count ``rows`` by the values of ``keys`` into ``into``."""
    if rows.num_rows == 0:
        return
    counted = rows.select(keys).group_by(keys).aggregate([([], "count_all")])
    for row in zip(*(counted[k].to_pylist() for k in [*keys, "count_all"]), strict=True):
        key = row[0] if len(keys) == 1 else tuple(row[:-1])
        into[key] = into.get(key, 0) + row[-1]
