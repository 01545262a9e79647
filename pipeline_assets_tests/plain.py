"""Reading a database with its plain driver (sqlite3, psycopg, PyMySQL), for tests' oracles.

Nothing of the implementation is imported: no engine, no reflection, no validation. A
bug in the package's read path cannot agree with itself through these.

The row hash and batch-digest line of :mod:`pipeline_assets.core.rows.digest` are here too,
recomputed a value at a time from that module's docstring (its constants written out
again), for any declared table.
"""

from __future__ import annotations

import sqlite3
import struct
from collections.abc import Mapping
from contextlib import closing
from datetime import tzinfo

from .model import stored_row


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
        with (
            closing(
                pymysql.connect(
                    host=parts.hostname,
                    port=parts.port or 3306,
                    user=unquote(parts.username),
                    password=unquote(parts.password or ""),
                    database=parts.path.lstrip("/"),
                    init_command="SET time_zone = '+00:00'",
                )
            ) as conn,
            closing(conn.cursor()) as cur,
        ):
            cur.execute(sql.replace("AS TEXT)", "AS CHAR)"))
            return [tuple(r) for r in cur.fetchall()]
    import psycopg  # the postgres extra; only PostgreSQL tests come here

    assert scheme in ("postgresql", "postgresql+psycopg"), url
    with psycopg.connect(f"postgresql://{rest}") as conn:
        return [tuple(r) for r in conn.execute(sql).fetchall()]


def source_orders(url: str) -> list[tuple]:
    """The app's ``orders`` rows exactly as stored: (order_id, status, amount, updated_at)."""
    return query(
        url,
        "SELECT order_id, status, CAST(amount AS TEXT), CAST(updated_at AS TEXT) "
        "FROM orders ORDER BY order_id",
    )


def source_rows(url: str, tz: tzinfo | None = None) -> list[tuple]:
    """The app's ``orders`` by ``order_id``: as stored (:func:`source_orders`), or, given
    the pipeline's zone ``tz``, each row as the warehouse must hold it, by the test's own
    rules (:func:`.model.stored_row`: the exact plain amount, the canonical UTC time)."""
    rows = source_orders(url)
    return rows if tz is None else [stored_row(*row, tz) for row in rows]


def warehouse_rows(url: str) -> list[tuple]:
    """The warehouse's ``orders`` by ``order_id`` as stored: (order_id, status, amount,
    updated_at), the key an ``int`` whatever integer type the database returns."""
    return [
        (int(r[0]), *r[1:])
        for r in query(
            url, "SELECT order_id, status, amount, updated_at FROM orders ORDER BY order_id"
        )
    ]


# --- the fingerprints of pipeline_assets.core.rows.digest, from its docstring alone --------------
# A declaration is read through its attributes only (``spec.columns``: ``name``,
# ``type.kind``, ``nullable``); a row is its stored values in declaration order, or a
# mapping by column name: ``int`` for integer, ``float``, ``bool``, ``str`` for text,
# decimal (the exact text), date (``YYYY-MM-DD``) and timestamp (canonical UTC text),
# ``None`` for NULL.

SEED = 0x243F6A8885A308D3
TEXT_SEED = 0x13198A2E03707344
M = 0x9E3779B97F4A7C15
MASK = (1 << 64) - 1
TEXTUAL = ("text", "decimal", "date", "timestamp")


def take(state: int, word: int) -> int:
    """``s = (s XOR w) * M mod 2**64; s ^= s >> 32``."""
    state = ((state ^ word) * M) & MASK
    return state ^ (state >> 32)


def text_hash(text: str) -> int:
    """From TEXT_SEED: the UTF-8 byte length, then the bytes zero-padded to words of 8,
    little-endian."""
    data = text.encode()
    state = take(TEXT_SEED, len(data))
    data += b"\0" * (-len(data) % 8)
    for i in range(0, len(data), 8):
        state = take(state, int.from_bytes(data[i : i + 8], "little"))
    return state


def finish(state: int) -> int:
    """MurmurHash3's 64-bit finalizer."""
    for factor in (0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53):
        state ^= state >> 33
        state = (state * factor) & MASK
    return state ^ (state >> 33)


def value_word(kind: str, value) -> int:
    """The word a non-NULL value of a column of type ``kind`` gives a row's hash."""
    if kind == "integer":
        assert type(value) is int, value
        return value & MASK  # two's complement
    if kind in TEXTUAL:
        assert type(value) is str, value
        return text_hash(value)
    if kind == "float":
        assert type(value) is float, value
        return struct.unpack("<Q", struct.pack("<d", 0.0 if value == 0 else value))[0]
    if kind == "boolean":
        assert type(value) is bool, value
        return int(value)
    raise AssertionError(f"no such type: {kind}")


def _columns(spec, row) -> list[tuple[str, bool, object]]:
    """(kind, nullable, value) of each declared column of ``row``."""
    columns = spec.columns
    values = [row[c.name] for c in columns] if isinstance(row, Mapping) else list(row)
    assert len(values) == len(columns), (values, [c.name for c in columns])
    return [(c.type.kind, c.nullable, v) for c, v in zip(columns, values, strict=True)]


def row_hash(spec, row) -> int:
    """A stored row's 64-bit hash: from SEED, one word per column (a nullable column:
    1 then the word, or 0 then 0 for NULL), then the finalizer."""
    state = SEED
    for kind, nullable, value in _columns(spec, row):
        if nullable:
            state = take(state, 0 if value is None else 1)
            state = take(state, 0 if value is None else value_word(kind, value))
        else:
            assert value is not None, "NULL in a column that is not nullable"
            state = take(state, value_word(kind, value))
    return finish(state)


def digest_text(kind: str, nullable: bool, value) -> str:
    """A value as a batch-digest line writes it."""
    if value is None:
        assert nullable, "NULL in a column that is not nullable"
        return "\x1e"
    if kind == "integer":
        return str(value)
    if kind == "float":
        return repr(0.0 if value == 0 else value)
    if kind == "boolean":
        return "true" if value else "false"
    if kind == "text" and nullable and value.startswith("\x1e"):
        return "\x1e" + value
    return value


def digest_line(spec, row) -> bytes:
    """A stored row's line of its batch's digest: texts joined by \\x1f, then \\n."""
    return ("\x1f".join(digest_text(*column) for column in _columns(spec, row)) + "\n").encode()
