"""Engines of the source and the warehouse, through SQLAlchemy Core (SQLite, PostgreSQL, and
MySQL or MariaDB as a source), and what went wrong with one, in one sentence."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote, unquote

import sqlalchemy as sa
from sqlalchemy.engine import URL, Engine, make_url

from ..errors import DatabaseError
from ..failures import BUSY, FULL, NO_PERMISSION, READ_ONLY, UNREACHABLE, classify
from ..secrets import redact, scrub


def sqlite_file(url: str | URL) -> Path | None:
    """The file behind a SQLite URL; None for other databases and in-memory ones.

    The one reader of this rule. Two forms name a file: a path
    (``sqlite:///data/app.db``, ``sqlite:////abs/app.db``) and a SQLite URI filename
    (``sqlite:///file:/abs/app.db?mode=ro&uri=true``, also ``file:///abs/app.db`` and
    ``file:relative.db``), whose path SQLite percent-decodes. A name starting ``file:``
    is read as a URI even without ``uri=true``, as SQLite builds with URI support do.
    ``:memory:``, an empty path and ``mode=memory`` name no file.
    """
    name = sqlite_name(url)
    if name is None:
        return None
    if not name.startswith("file:"):
        return Path(name)
    path, _, query = name[len("file:") :].partition("?")
    if "mode=memory" in query.split("&"):
        return None
    path = path.split("#", 1)[0]
    if path.startswith("//"):  # file://<authority>/path: the authority is empty or localhost
        authority, _, rest = path[2:].partition("/")
        if authority not in ("", "localhost"):
            return None  # SQLite refuses it; make_engine's connection reports that
        path = "/" + rest
    path = unquote(path)
    if path in ("", ":memory:"):
        return None
    return Path(path)


def sqlite_name(url: str | URL) -> str | None:
    """What SQLite itself is given to open for a SQLite URL: the path, or the URI filename
    with the URL's query (``mode=ro`` …, less SQLAlchemy's own ``uri``); None for other
    databases and in-memory ones. The Arrow reader opens the same database through it."""
    try:
        parsed = make_url(url)
    except Exception:  # make_engine reports a bad URL properly
        return None
    database = parsed.database
    if parsed.get_backend_name() != "sqlite" or database in (None, "", ":memory:"):
        return None
    if not database.startswith("file:"):
        return database
    params = [f"{k}={v}" for k, v in parsed.query.items() if k != "uri"]
    if params:
        database += ("&" if "?" in database else "?") + "&".join(params)
    return database


def require_distinct(source: Engine, warehouse: Engine) -> None:
    """Refuse one database as both source and warehouse: the source is only read, and
    the warehouse's tables (a declared table's copy may have the source table's name) are
    written."""
    if source.url == warehouse.url:
        raise DatabaseError(
            f"the source and the warehouse are the same database ({redact(source.url)}); "
            "the source is only read and the warehouse is written, so they must be two databases"
        )


def make_engine(url: str, *, role: str) -> Engine:
    """An engine for ``url``; ``role`` names it in errors: "source" (the pipeline reading
    the app's database), "warehouse", or "app" (the demo, writing the app's database).

    SQLite connections get a busy timeout and explicit ``BEGIN`` so that a transaction
    really spans every statement of a run (pysqlite's legacy mode would not), and the
    warehouse runs in WAL mode so readers never wait for a load. A SQLite source is never
    created: the pipeline only reads the app's database, so a path that names no file is
    refused here, naming it, and every connection opens the file as it is (``mode=rw``:
    SQLite's own "do not create").
    """
    try:
        parsed = make_url(url)
    except Exception as exc:
        raise DatabaseError(
            f"the {role} database URL {redact(url)!r} is not a SQLAlchemy URL "
            "(sqlite:///path/app.db or postgresql+psycopg://user@127.0.0.1/db)"
        ) from exc
    never_create = role == "source" and _plain_sqlite_file(url)
    if never_create and not never_create.exists():
        raise DatabaseError(
            f"the source database {never_create} does not exist ({redact(url)}): the "
            "pipeline only reads the app's database and never creates it. Point "
            "SOURCE_DATABASE_URL (or the table's source_url) at the app's database file, "
            "or create the demo's with `pipeline-assets demo init`"
        )
    try:
        engine = sa.create_engine(parsed, pool_pre_ping=True)
    except Exception as exc:  # a missing driver, an unknown dialect
        raise DatabaseError(
            f"cannot use the {role} database {redact(url)}: {scrub(str(exc), url)}"
        ) from None
    if engine.dialect.name == "sqlite":
        preparer = engine.dialect.identifier_preparer  # a keyword as a name: quoted
        preparer.reserved_words = preparer.reserved_words | SQLITE_KEYWORDS
        _sqlite_transactions(engine, wal=(role == "warehouse"))
        if never_create:
            _sqlite_never_create(engine, never_create)
    if dialect_of(engine) == MYSQL:
        if role == "warehouse":
            raise DatabaseError(
                f"the warehouse database {redact(url)} is MySQL or MariaDB, which the "
                "pipeline reads as a source only; point WAREHOUSE_DATABASE_URL at SQLite or "
                "PostgreSQL"
            )
        _mysql_session(engine)
    engine.info_role = role  # type: ignore[attr-defined]
    return engine


# Every keyword SQLite's parser knows (sqlite.org/lang_keywords.html), SQLAlchemy's list of
# its reserved words lacks some (``nothing``, ``do``, ``filter``, ``window``...): a column of
# that name written bare is a syntax error there.
SQLITE_KEYWORDS = frozenset(
    """abort action add after all alter always analyze and as asc attach autoincrement
    before begin between by cascade case cast check collate column commit conflict
    constraint create cross current current_date current_time current_timestamp database
    default deferrable deferred delete desc detach distinct do drop each else end escape
    except exclude exclusive exists explain fail filter first following for foreign from
    full generated glob group groups having if ignore immediate in index indexed initially
    inner insert instead intersect into is isnull join key last left like limit match
    materialized natural no not nothing notnull null nulls of offset on or order others
    outer over partition plan pragma preceding primary query raise range recursive
    references regexp reindex release rename replace restrict returning right rollback row
    rows savepoint select set table temp temporary then ties to transaction trigger
    unbounded union unique update using vacuum values view virtual when where window with
    without""".split()
)


MYSQL = "mysql"  # MySQL and MariaDB: one SQL dialect here, whatever SQLAlchemy calls it


def dialect_of(engine: Engine) -> str:
    """``sqlite``, ``postgresql`` or ``mysql`` (MariaDB too): the SQL the pipeline writes."""
    name = engine.dialect.name
    return MYSQL if name in ("mysql", "mariadb") else name


def _mysql_session(engine: Engine) -> None:
    """Every session in UTC: a ``TIMESTAMP`` column is then read as the UTC instant it
    stores, whatever the server's or the account's default zone (DATETIME and DATE have
    no zone and are read in PIPELINE_TIMEZONE, like any timestamp without offset)."""

    @sa.event.listens_for(engine, "connect")
    def _connect(dbapi_connection, _record):
        cursor = dbapi_connection.cursor()
        cursor.execute("SET time_zone = '+00:00'")
        cursor.close()


def _plain_sqlite_file(url: str | URL) -> Path | None:
    """The file a SQLite URL names by a plain path (not a ``file:`` URI, whose own
    ``mode`` the user chose), else None."""
    name = sqlite_name(url)
    return sqlite_file(url) if name is not None and not name.startswith("file:") else None


def never_create_uri(path: Path) -> str:
    """The SQLite URI filename that opens ``path`` for reading and writing but never
    creates it (``mode=rw``): a missing file is an error, not an empty database."""
    return f"file:{quote(str(path), safe='/')}?mode=rw"


def _sqlite_never_create(engine: Engine, path: Path) -> None:
    @sa.event.listens_for(engine, "do_connect")
    def _connect(_dialect, _record, cargs, cparams):
        cargs[:] = [never_create_uri(path)]
        cparams["uri"] = True


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


# --- what went wrong with a database ---------------------------------------------------


# The kinds of failure, and the driver codes that tell them (SQLite, PostgreSQL, MySQL),
# live in core/failures.py; they are named here too, where every caller finds them.
def connect_error(
    exc: BaseException, engine: Engine, env_var: str, kind: str | None = None
) -> DatabaseError:
    """A one-sentence error for a database that cannot be used, naming what to do.

    Read-only, refused and full databases are told apart from unreachable ones, since
    the fix differs; in every case whatever the run had written is rolled back.
    """
    kind = kind or classify(exc) or UNREACHABLE
    role = getattr(engine, "info_role", "the")
    detail = scrub(str(getattr(exc, "orig", exc) or exc), engine.url).strip().splitlines()
    first = detail[0] if detail else type(exc).__name__
    where = f"the {role} database at {redact(engine.url)}"
    if kind == READ_ONLY:
        return DatabaseError(
            f"{where} is read-only ({first}); nothing was committed. Give the pipeline "
            f"write access there, or point {env_var} at a writable database.",
            kind=kind,
        )
    if kind == NO_PERMISSION:
        return DatabaseError(
            f"{where} refused the pipeline's role ({first}); nothing was committed. Grant "
            f"it the rights it needs there (see docs/deployment.md), or point {env_var} at "
            "another database.",
            kind=kind,
        )
    if kind == FULL:
        return DatabaseError(
            f"{where} is out of space ({first}); nothing was committed. Free some space "
            "and run again.",
            kind=kind,
        )
    if kind == BUSY:
        return DatabaseError(
            f"{where} is busy ({first}): another writer held a lock longer than the wait; "
            "nothing was committed. Run again.",
            kind=kind,
        )
    return DatabaseError(
        f"cannot reach {where}: {first}. Check {env_var} and that the server is running.", kind=kind
    )


@contextmanager
def guard(engine: Engine, env_var: str) -> Iterator[None]:
    """Turn a database failure inside the block into a one-line :class:`DatabaseError`.

    The one place that classifies driver errors (see :func:`classify`); ``env_var`` is
    the variable the message tells the user to check. Anything that is not a database
    failure passes through unchanged.
    """
    try:
        yield
    except sa.exc.DBAPIError as exc:
        kind = classify(exc)
        if kind is None:
            raise
        raise connect_error(exc, engine, env_var, kind) from None


def has_table(engine: Engine, name: str, env_var: str) -> bool:
    """Whether ``name`` exists; an unusable database is a one-line :class:`DatabaseError`."""
    with guard(engine, env_var):
        return sa.inspect(engine).has_table(name)


def arrow_connect(engine: Engine, env_var: str):
    """A connection of the database's Arrow (ADBC) driver, for reads that stream columns:
    SQLite's, or PostgreSQL's over binary ``COPY``. Closed by the caller.

    On SQLite it is the second copy of the SQLite library in the process (the first is
    the ``sqlite3`` module under SQLAlchemy), and two copies do not see each other's
    POSIX locks: closing a file in one drops the locks the other holds on it. So the
    engine's idle connections to the file are closed first; every caller reads through
    this connection alone while it is open, and only ever reads.
    """
    url = engine.url
    if engine.dialect.name == "sqlite":
        name = sqlite_name(url)
        if name is None:
            raise DatabaseError(
                f"the {_role(engine)} database {redact(url)} is an in-memory database, "
                f"which only its own process can read; point {env_var} at a file"
            )
        import adbc_driver_sqlite.dbapi as adbc_sqlite

        if _role(engine) == "source" and not name.startswith("file:"):
            name = never_create_uri(Path(name))
        engine.dispose()
        conn = adbc_sqlite.connect(name)
        cursor = conn.cursor()
        try:  # wait for a writer, as the engine does
            cursor.execute("PRAGMA busy_timeout = 60000")
        finally:
            cursor.close()
        return conn
    if engine.dialect.name == "postgresql":
        import adbc_driver_postgresql.dbapi as adbc_postgresql

        return adbc_postgresql.connect(
            url.set(drivername="postgresql").render_as_string(hide_password=False)
        )
    raise DatabaseError(
        f"the {_role(engine)} dialect {engine.dialect.name!r} is not "
        "supported here; use SQLite or PostgreSQL"
    )


def connectorx_url(engine: Engine) -> str:
    """The URL connectorx, the columnar reader of a MySQL or MariaDB source, connects to."""
    url = engine.url.set(drivername="mysql", query={})
    return url.render_as_string(hide_password=False)


def arrow_errors() -> tuple[type[BaseException], ...]:
    """What the Arrow drivers raise for a database that cannot be read."""
    import adbc_driver_manager

    return adbc_driver_manager.Error, OSError


def _role(engine: Engine) -> str:
    return getattr(engine, "info_role", "")
