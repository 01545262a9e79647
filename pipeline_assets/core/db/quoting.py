"""Names as SQL: a declared table's or column's name quoted as its database's dialect
needs (a reserved word, upper case, any other character), in the form each way of sending
SQL takes it (:func:`quote` as the database reads it; :func:`through_sqlalchemy` for
SQLAlchemy's ``exec_driver_sql``, whose drivers read a ``%`` as a parameter)."""

from __future__ import annotations

import functools

from .engines import MYSQL, SQLITE_KEYWORDS


@functools.cache
def preparer(dialect: str):
    """SQLAlchemy's identifier preparer of ``dialect`` (a name, as :func:`~.engines.db.dialect_of`
    gives it). For MySQL, quoting what either MySQL or MariaDB reserves. Only that
    dialect's package is imported (all three took 0.3 s of a run that needs one)."""
    if dialect == MYSQL:
        from sqlalchemy.dialects import mysql

        preparer = mysql.dialect().identifier_preparer
        preparer.reserved_words = (
            preparer.reserved_words
            | mysql.dialect(is_mariadb=True).identifier_preparer.reserved_words
        )
        return preparer
    if dialect == "sqlite":
        from sqlalchemy.dialects import sqlite

        preparer = sqlite.dialect().identifier_preparer
        preparer.reserved_words = preparer.reserved_words | SQLITE_KEYWORDS
        return preparer
    from sqlalchemy.dialects import postgresql

    return postgresql.dialect().identifier_preparer


def quote(name: str, dialect: str) -> str:
    """A column name as ``dialect``'s SQL: as it is unless it must be quoted (a reserved
    word, upper case, other characters): ``order_id``, ``"Order"``, ```Order```.

    The name as the database reads it, for the readers that send SQL as it is (the Arrow
    drivers, connectorx, a DBAPI cursor given no parameters); SQL sent through
    SQLAlchemy goes through :func:`through_sqlalchemy` first."""
    quoted = preparer(dialect).quote(name)
    # SQLAlchemy's preparers of PostgreSQL and MySQL double a % for their drivers' own
    # parameter syntax; the name itself has one
    return quoted.replace("%%", "%") if dialect != "sqlite" else quoted


def through_sqlalchemy(sql: str, dialect: str) -> str:
    """SQL written with :func:`quote` (and literals of our own), as SQLAlchemy's
    ``exec_driver_sql`` must be given it: psycopg and PyMySQL read a ``%`` as the start of
    a parameter there, so every ``%`` is doubled (a name or a text literal may hold one)."""
    return sql if dialect == "sqlite" else sql.replace("%", "%%")
