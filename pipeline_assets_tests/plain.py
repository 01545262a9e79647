"""Reading a database with its plain driver (sqlite3, psycopg), for tests' oracles.

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
    import psycopg  # the postgres extra; only PostgreSQL tests come here

    scheme, rest = url.split("://", 1)
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
