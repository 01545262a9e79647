"""Reading a database with its plain driver (sqlite3, psycopg, PyMySQL), for tests' oracles.

Nothing of the implementation is imported: no engine, no reflection, no validation. A
bug in the package's read path cannot agree with itself through these.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing


def query(url: str, sql: str) -> list[tuple]:
    """Every row of ``sql`` on the database of a SQLAlchemy-style URL, as plain tuples."""
    if url.startswith("sqlite:///"):
        with closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as conn:
            return [tuple(r) for r in conn.execute(sql).fetchall()]
    scheme, rest = url.split("://", 1)
    if scheme.startswith(("mysql", "mariadb")):  # the mysql extra; MariaDB tests only
        from urllib.parse import unquote, urlsplit

        import pymysql

        parts = urlsplit(f"mysql://{rest}")
        with closing(pymysql.connect(
                host=parts.hostname, port=parts.port or 3306, user=unquote(parts.username),
                password=unquote(parts.password or ""), database=parts.path.lstrip("/"),
                init_command="SET time_zone = '+00:00'")) as conn, \
                closing(conn.cursor()) as cur:
            cur.execute(sql.replace("AS TEXT)", "AS CHAR)"))
            return [tuple(r) for r in cur.fetchall()]
    import psycopg  # the postgres extra; only PostgreSQL tests come here

    assert scheme in ("postgresql", "postgresql+psycopg"), url
    with psycopg.connect(f"postgresql://{rest}") as conn:
        return [tuple(r) for r in conn.execute(sql).fetchall()]


def source_orders(url: str) -> list[tuple]:
    """The app's ``orders`` rows exactly as stored: (order_id, status, amount, updated_at)."""
    return query(url, "SELECT order_id, status, CAST(amount AS TEXT), CAST(updated_at AS TEXT) "
                      "FROM orders ORDER BY order_id")


def warehouse_orders(url: str) -> list[tuple]:
    """The warehouse's ``orders`` rows as stored."""
    return query(url, "SELECT order_id, status, amount, updated_at FROM orders "
                      "ORDER BY order_id")
