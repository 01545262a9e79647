"""The pipeline's own working columns, kept apart from every declared one.

Rows travel as Arrow tables (and, in a load, a temporary SQL table) that hold a declared
table's columns beside a few columns of the pipeline's own: a row's cursor as an instant,
the day it belongs to, whether a daily file keeps it, a row number for a join. A declared
column may have any name a source can give it (``day``, ``instant``, ``paid``, ``file``,
``key``, ``order``, ``Group``, ``Größe``), so every working column's name starts with
:data:`PREFIX`, which :func:`.declare.declare` refuses in a declaration: the two namespaces
never meet.

The names are never stored in the warehouse table, written in a day file or shown to a
user; only the load's temporary tables (dropped with its transaction) hold them in SQL.
"""

from __future__ import annotations

PREFIX = "__pipeline_"  # no declared column may start with it (core/table/declare.py)

INSTANT = PREFIX + "instant"  # the cursor as an instant (UTC); a date: its midnight in the zone
DAY = PREFIX + "day"  # the day a row belongs to: days since 1970-01-01 (int32)
# the day column as an instant (a date: its midnight), where it is not the cursor
DAY_AT = PREFIX + "day_at"
FILED = PREFIX + "filed"  # whether one of the table's daily files keeps the row
FILE = PREFIX + "file"  # the name of a daily file, in a per-file tally
COLUMN = PREFIX + "column"  # the name of a declared column, in a per-column tally
ROW = PREFIX + "row"  # a row's position, carried through a join
EXISTED = PREFIX + "existed"  # the load's changed rows: the key the table held (NULL: new)
NULL_FLAG = PREFIX + "null_"  # + position: the SQLite scan's "this value is NULL" column


def old(column: str) -> str:
    """The load's changed rows: the value ``column`` held in the table before the merge."""
    return f"{PREFIX}old_{column}"


def is_working(name: str) -> bool:
    """Whether ``name`` is in the pipeline's own namespace (refused as a declared column)."""
    return name.startswith(PREFIX)
