"""The pipeline's own tables in the warehouse, shared by every declared table: each
table's watermark and its history, the batch ledger, the declarations batches were
written with, the columns still to fill; :func:`ensure_schema` makes what is missing, a
warehouse of an earlier release included.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from ..errors import DatabaseError
from ..failures import BUSY
from ..table import ORDERS
from ..table.spec import TableSpec
from .engines import guard, sqlite_file, writing
from .schema import ensure_table, totals_table

# The release before declarations wrote one table, the chapter's orders, and its rows of
# the state tables name none: they belong to the declared table of that name, whatever it
# declares now (a changed declaration of it is then refused against what it was).
UNNAMED_ROWS_TABLE = ORDERS.name

metadata = sa.MetaData()

watermark_state = sa.Table(
    "pipeline_watermark",
    metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("value", sa.String(32), nullable=True),
    sa.Column("lock_holder", sa.String(128), nullable=True),
)

watermark_history = sa.Table(
    "pipeline_watermark_history",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("changed_at", sa.String(32), nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),  # load | rewind
    sa.Column("old_value", sa.String(32), nullable=True),
    sa.Column("new_value", sa.String(32), nullable=True),
    sa.Column("reason", sa.Text, nullable=True),
    sa.Column("batch_id", sa.String(64), nullable=True),
    sa.Column("table_name", sa.String(64), nullable=True),  # NULL: orders (made before)
)

batches = sa.Table(
    "pipeline_batches",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),  # commit order
    sa.Column("batch_id", sa.String(64), nullable=False, unique=True),
    sa.Column("kind", sa.String(16), nullable=False),  # incremental | range
    sa.Column("window_start", sa.String(32), nullable=True),
    sa.Column("window_end", sa.String(32), nullable=True),
    sa.Column("rows_read", sa.BigInteger, nullable=False),
    sa.Column("inserted", sa.BigInteger, nullable=False),
    sa.Column("updated", sa.BigInteger, nullable=False),
    sa.Column("unchanged", sa.BigInteger, nullable=False),
    sa.Column("watermark_before", sa.String(32), nullable=True),
    sa.Column("watermark_after", sa.String(32), nullable=True),
    sa.Column("committed_at", sa.String(32), nullable=False),
    sa.Column("days_touched", sa.Text, nullable=False),  # JSON list of YYYY-MM-DD
    # range loads only (an incremental load cannot see a deletion: NULL there): how many
    # orders the batch deleted because the source no longer holds them, a digest of their
    # keys, and whether they were more than MAX_DELETE_SHARE, let through by allow_deletes
    sa.Column("rows_deleted", sa.BigInteger, nullable=True),
    sa.Column("deleted_digest", sa.String(64), nullable=True),
    sa.Column("mass_delete_allowed", sa.Boolean, nullable=True),
    # the declared table the batch loaded (NULL: orders, in a warehouse made before)
    sa.Column("table_name", sa.String(64), nullable=True),
    # the fingerprint of the declaration the batch was written with (core/warehouse/declaration.py;
    # NULL: written before declarations were recorded, orders' batches under ORDERS)
    sa.Column("declaration", sa.String(64), nullable=True),
)

declarations = sa.Table(
    "pipeline_declarations",
    metadata,
    # one row per distinct declaration of a table, written with the first batch under it
    sa.Column("table_name", sa.String(64), primary_key=True),  # the spec's name, orders too
    sa.Column("fingerprint", sa.String(64), primary_key=True),
    sa.Column("declaration", sa.Text, nullable=False),  # the JSON the fingerprint hashes
    sa.Column("first_batch_id", sa.String(64), nullable=False),
    sa.Column("recorded_at", sa.String(32), nullable=False),  # canonical UTC
)
column_fills = sa.Table(
    "pipeline_column_fills",
    metadata,
    # one row per column a declaration added to a table that already held rows
    # (core/warehouse/evolve.py): the days whose rows were stored without it and have not been read
    # whole since, which range loads fill
    sa.Column("table_name", sa.String(64), primary_key=True),
    sa.Column("column_name", sa.String(255), primary_key=True),
    sa.Column("added_batch_id", sa.String(64), primary_key=True),  # the batch that added it
    sa.Column("declaration", sa.String(64), nullable=False),  # that batch's fingerprint
    sa.Column("added_at", sa.String(32), nullable=False),  # canonical UTC
    sa.Column("rows_before", sa.BigInteger, nullable=False),  # rows the table held then
    sa.Column("days", sa.Text, nullable=False),  # JSON list of YYYY-MM-DD still unfilled
)
comparisons = sa.Table(
    "pipeline_comparisons",
    metadata,
    # one row per table: the last ledger row (pipeline_batches.id) whose touched days the
    # full comparison of the N_match_source check has compared (core/verify/pending.py)
    sa.Column("table_name", sa.String(64), primary_key=True),
    sa.Column("through_id", sa.BigInteger, nullable=False),
    sa.Column("compared_at", sa.String(32), nullable=False),  # canonical UTC
)
id_holes = sa.Table(
    "pipeline_id_holes",
    metadata,
    # an append-only table's ids missing below what a run read (core/load/holes.py): read
    # again by key by the next runs until found or HOLE_HOURS old
    sa.Column("table_name", sa.String(64), primary_key=True),
    sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("seen_at", sa.String(32), nullable=False),  # canonical UTC: first missed
)
# Columns added after a table's first release: a warehouse made before gains them.
ADDED_COLUMNS = {
    "pipeline_batches": (
        "rows_deleted",
        "deleted_digest",
        "mass_delete_allowed",
        "table_name",
        "declaration",
    ),
    "pipeline_watermark_history": ("table_name",),
}
# shared by every table; a warehouse made before a table existed gains it (create_all)
STATE_TABLES = (
    watermark_state,
    watermark_history,
    batches,
    declarations,
    column_fills,
    comparisons,
    id_holes,
)


def of_table(column: sa.Column, spec: TableSpec) -> sa.ColumnElement[bool]:
    """Rows of the state tables that belong to the declared table ``spec``: a row written
    before declarations existed has no ``table_name`` and belongs to
    :data:`UNNAMED_ROWS_TABLE`."""
    if spec.name == UNNAMED_ROWS_TABLE:
        return sa.or_(column == spec.name, column.is_(None))
    return column == spec.name


def ensure_schema(conn: sa.Connection, spec: TableSpec | None) -> None:
    """Create the pipeline's state tables, ``spec``'s warehouse table and its watermark
    row if missing (None: the state tables only), in ``conn``'s transaction; a warehouse
    of an earlier release gains the columns added since."""
    metadata.create_all(conn, tables=list(STATE_TABLES), checkfirst=True)
    _add_missing_columns(conn)
    if spec is None:
        return
    ensure_table(conn, spec)
    if spec.legacy is not None:  # orders' totals exist from its first load, as they did
        for files in spec.daily_files[:1]:
            if files.totals is not None:
                totals_table(spec, files.totals).create(conn, checkfirst=True)
    exists = conn.execute(
        sa.select(watermark_state.c.name).where(watermark_state.c.name == spec.name)
    ).first()
    if exists is None:
        conn.execute(watermark_state.insert().values(name=spec.name, value=None))


def _add_missing_columns(conn: sa.Connection) -> None:
    """``ALTER TABLE … ADD COLUMN`` for each of :data:`ADDED_COLUMNS` a table lacks (all of
    them are nullable, so old rows read as NULL: nothing known)."""
    for name, columns in ADDED_COLUMNS.items():
        present = {c["name"] for c in sa.inspect(conn).get_columns(name)}
        table = metadata.tables[name]
        for column in columns:
            if column not in present:
                kind = table.c[column].type.compile(dialect=conn.dialect)
                conn.exec_driver_sql(f"ALTER TABLE {name} ADD COLUMN {column} {kind}")


def prepare_warehouse(engine: Engine, spec: TableSpec | None) -> None:
    """:func:`ensure_schema` in its own transaction, tolerating a concurrent creator.

    A SQLite warehouse file's folder is created here, when a run first needs it.
    """
    path = sqlite_file(engine.url)
    if path is not None and engine.url.query.get("mode") != "ro":
        path.parent.mkdir(parents=True, exist_ok=True)
    for attempt in range(3):
        try:
            with guard(engine, "WAREHOUSE_DATABASE_URL"), writing(engine).begin() as conn:
                ensure_schema(conn, spec)
            return
        except DatabaseError as exc:
            if exc.kind != BUSY or attempt == 2:
                raise
        except (sa.exc.IntegrityError, sa.exc.ProgrammingError):
            if attempt == 2:  # another run created the same tables at the same moment
                raise
