"""Engines and the warehouse schema, through SQLAlchemy Core (SQLite and PostgreSQL alike)."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import sqlalchemy as sa
from sqlalchemy.engine import URL, Engine, make_url


class DatabaseError(RuntimeError):
    """A database the pipeline cannot use; the message never contains a password."""


def redact(url: str | URL) -> str:
    """The URL as it may be shown to a user: password replaced by ``***``."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # an unparseable URL must not leak either
        return re.sub(r"//([^:/@]*):[^@]*@", r"//\1:***@", str(url))


def scrub(message: str, url: str | URL) -> str:
    """Remove the password of ``url`` from any text (driver errors may echo it)."""
    try:
        password = make_url(url).password
    except Exception:
        password = None
    if password:
        message = message.replace(str(password), "***")
    return message


def sqlite_file(url: str | URL) -> Path | None:
    """The file behind a SQLite URL; None for other databases and in-memory ones.

    The one reader of this rule. Two forms name a file: a path
    (``sqlite:///data/app.db``, ``sqlite:////abs/app.db``) and a SQLite URI filename
    (``sqlite:///file:/abs/app.db?mode=ro&uri=true``, also ``file:///abs/app.db`` and
    ``file:relative.db``), whose path SQLite percent-decodes. A name starting ``file:``
    is read as a URI even without ``uri=true``, as SQLite builds with URI support do.
    ``:memory:``, an empty path and ``mode=memory`` name no file.
    """
    try:
        parsed = make_url(url)
    except Exception:  # make_engine reports a bad URL properly
        return None
    database = parsed.database
    if parsed.get_backend_name() != "sqlite" or database in (None, "", ":memory:"):
        return None
    if not database.startswith("file:"):
        return Path(database)
    if parsed.query.get("mode") == "memory":
        return None
    path = database[len("file:"):].split("#", 1)[0]
    if path.startswith("//"):  # file://<authority>/path: the authority is empty or localhost
        authority, _, rest = path[2:].partition("/")
        if authority not in ("", "localhost"):
            return None  # SQLite refuses it; make_engine's connection reports that
        path = "/" + rest
    path = unquote(path)
    if path in ("", ":memory:"):
        return None
    return Path(path)


def require_distinct(source: Engine, warehouse: Engine) -> None:
    """Refuse one database as both source and warehouse: both have a table named orders."""
    if source.url == warehouse.url:
        raise DatabaseError(
            f"the source and the warehouse are the same database ({redact(source.url)}); "
            "both have a table named orders, so they must differ"
        )


def make_engine(url: str, *, role: str) -> Engine:
    """An engine for ``url``; ``role`` ("source", "warehouse") only names it in errors.

    SQLite connections get a busy timeout and explicit ``BEGIN`` so that a transaction
    really spans every statement of a run (pysqlite's legacy mode would not), and the
    warehouse runs in WAL mode so readers never wait for a load.
    """
    try:
        parsed = make_url(url)
    except Exception as exc:
        raise DatabaseError(
            f"the {role} database URL {redact(url)!r} is not a SQLAlchemy URL "
            "(sqlite:///path/app.db or postgresql+psycopg://user@127.0.0.1/db)"
        ) from exc
    try:
        engine = sa.create_engine(parsed, pool_pre_ping=True)
    except Exception as exc:  # a missing driver, an unknown dialect
        raise DatabaseError(f"cannot use the {role} database {redact(url)}: {scrub(str(exc), url)}"
                            ) from None
    if engine.dialect.name == "sqlite":
        _sqlite_transactions(engine, wal=(role == "warehouse"))
    engine.info_role = role  # type: ignore[attr-defined]
    return engine


def _sqlite_transactions(engine: Engine, *, wal: bool) -> None:
    @sa.event.listens_for(engine, "connect")
    def _connect(dbapi_connection, _record):
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA busy_timeout = 60000")
        if wal and engine.url.database not in (None, "", ":memory:"):
            cursor.execute("PRAGMA journal_mode = WAL")
        cursor.close()

    @sa.event.listens_for(engine, "begin")
    def _begin(connection):
        mode = connection.get_execution_options().get("sqlite_begin", "DEFERRED")
        connection.exec_driver_sql(f"BEGIN {mode}")


def writing(engine: Engine) -> Engine:
    """The same engine for transactions that will write.

    On SQLite they begin IMMEDIATE: a deferred transaction that reads first and writes
    later cannot wait for another writer (SQLite refuses the upgrade at once with
    "database is locked"), while an immediate one queues behind it for the busy
    timeout. Elsewhere this changes nothing.
    """
    return engine.execution_options(sqlite_begin="IMMEDIATE")


def connect_error(exc: Exception, engine: Engine, env_var: str) -> DatabaseError:
    """A one-sentence error for a database that cannot be used, naming what to do.

    Read-only and full databases are told apart from unreachable ones, since the fix
    differs; in every case whatever the run had written is rolled back.
    """
    role = getattr(engine, "info_role", "the")
    detail = scrub(str(getattr(exc, "orig", exc) or exc), engine.url).strip().splitlines()
    first = detail[0] if detail else type(exc).__name__
    lowered = first.lower()
    where = f"the {role} database at {redact(engine.url)}"
    if "readonly" in lowered or "read-only" in lowered or "read only" in lowered:
        return DatabaseError(
            f"{where} is read-only ({first}); nothing was committed. Give the pipeline "
            f"write access there, or point {env_var} at a writable database."
        )
    if "disk is full" in lowered or "no space left" in lowered or "disk full" in lowered:
        return DatabaseError(
            f"{where} is out of space ({first}); nothing was committed. Free some space "
            "and run again."
        )
    return DatabaseError(
        f"cannot reach {where}: {first}. Check {env_var} and that the server is running."
    )


def has_table(engine: Engine, name: str, env_var: str) -> bool:
    """Whether ``name`` exists; an unusable database is a one-line :class:`DatabaseError`."""
    try:
        return sa.inspect(engine).has_table(name)
    except (sa.exc.OperationalError, sa.exc.InterfaceError) as exc:
        raise connect_error(exc, engine, env_var) from None


# --- the warehouse schema -------------------------------------------------------------

metadata = sa.MetaData()

orders = sa.Table(
    "orders",
    metadata,
    sa.Column("order_id", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("amount", sa.Text, nullable=False),  # exact decimal text, e.g. "40.00"
    sa.Column("updated_at", sa.String(32), nullable=False),  # canonical UTC, sorts as it compares
    sa.Index("orders_updated_at_idx", "updated_at"),
)

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
)

daily_revenue = sa.Table(
    "daily_revenue",
    metadata,
    sa.Column("day", sa.String(10), primary_key=True),  # YYYY-MM-DD in PIPELINE_TIMEZONE
    sa.Column("orders", sa.BigInteger, nullable=False),
    sa.Column("revenue", sa.Text, nullable=False),  # exact decimal text
)

PIPELINE = "orders"  # the row of pipeline_watermark that this pipeline owns


def ensure_schema(conn: sa.Connection) -> None:
    """Create the warehouse tables and the watermark row if missing, in ``conn``'s transaction."""
    metadata.create_all(conn, checkfirst=True)
    exists = conn.execute(
        sa.select(watermark_state.c.name).where(watermark_state.c.name == PIPELINE)
    ).first()
    if exists is None:
        conn.execute(watermark_state.insert().values(name=PIPELINE, value=None))


def prepare_warehouse(engine: Engine) -> None:
    """:func:`ensure_schema` in its own transaction, tolerating a concurrent creator.

    A SQLite warehouse file's folder is created here, when a run first needs it.
    """
    path = sqlite_file(engine.url)
    if path is not None and engine.url.query.get("mode") != "ro":
        path.parent.mkdir(parents=True, exist_ok=True)
    for attempt in range(3):
        try:
            with writing(engine).begin() as conn:
                ensure_schema(conn)
            return
        except (sa.exc.OperationalError, sa.exc.InternalError) as exc:
            if "locked" not in str(exc).lower() or attempt == 2:
                raise connect_error(exc, engine, "WAREHOUSE_DATABASE_URL") from None
        except (sa.exc.IntegrityError, sa.exc.ProgrammingError):
            if attempt == 2:  # another run created the same tables at the same moment
                raise

