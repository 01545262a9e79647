"""A declaration's parts read and checked: its columns, primary key, change stamp and
daily files (with their filters and totals), and the names it gives assets.

:func:`.declare.declare` reads a declaration through these; each refusal is a
:class:`DeclarationError` naming the attribute's path and the value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import tzinfo

from ..errors import DeclarationError, TypeValueError, UnknownTypeError
from . import working
from .spec import FILE_FORMATS, Column, DailyFiles, Totals
from .types import ColumnType

# The warehouse tables the pipeline keeps for itself: no declaration may take their names.
OWN_TABLES = ("pipeline_watermark", "pipeline_watermark_history", "pipeline_batches")
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # a Dagster name that is also a SQL name
_MAX_NAME = 48  # room for suffixes (_match_source, _refresh_sensor) within SQL's 63
CURSOR_KINDS = ("timestamp", "date")
TOTALS_OWN = ("day", "rows")  # a totals table's own columns (core/daily_files/views.py)


def check_name(path: str, name: object) -> None:
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name) or len(name) > _MAX_NAME:
        raise DeclarationError(
            path,
            name,
            f"a name of letters, digits and _ (not starting "
            f"with a digit, at most {_MAX_NAME} characters)",
        )
    if name.lower() in OWN_TABLES or name.lower().startswith("pipeline_"):
        raise DeclarationError(
            path,
            name,
            "names starting with pipeline_ are the pipeline's own tables; choose another",
        )


def read_columns(raw: object) -> tuple[Column, ...]:
    if not isinstance(raw, Mapping) or not raw:
        raise DeclarationError(
            "columns", raw, "required: a mapping of column name to type (payment_id: integer)"
        )
    out = []
    for name, kind in raw.items():
        path = f"columns.{name}"
        if not isinstance(name, str) or not name.strip() or '"' in name:
            raise DeclarationError(path, name, "a column name (any text without a double quote)")
        if working.is_working(name):
            raise DeclarationError(
                path,
                name,
                f"names starting with {working.PREFIX} are the pipeline's own working "
                "columns; no declared column may use them",
            )
        nullable = False
        if isinstance(kind, Mapping):
            extra = set(kind) - {"type", "nullable"}
            if extra:
                raise DeclarationError(
                    f"{path}.{sorted(extra)[0]}",
                    kind[sorted(extra)[0]],
                    "unknown; a column takes type and nullable",
                )
            nullable = kind.get("nullable", False)
            if not isinstance(nullable, bool):
                raise DeclarationError(f"{path}.nullable", nullable, "true or false")
            kind, path = kind.get("type"), f"{path}.type"
        try:
            column_type = ColumnType.named(kind)
        except UnknownTypeError as exc:
            raise DeclarationError(path, kind, exc.reason) from None
        out.append(Column(name, column_type, nullable))
    return tuple(out)


def read_primary_key(raw: object, by_name: Mapping[str, Column]) -> tuple[str, ...]:
    keys = [raw] if isinstance(raw, str) else raw
    if not isinstance(keys, list) or not keys or not all(isinstance(k, str) for k in keys):
        raise DeclarationError("primary_key", raw, "required: a column, or a list of columns")
    if len(set(keys)) != len(keys):
        raise DeclarationError("primary_key", raw, "names a column twice")
    for key in keys:
        column = by_name.get(key)
        if column is None:
            raise DeclarationError("primary_key", key, "is not a declared column (columns)")
        if not column.type.key_type:
            raise DeclarationError(
                "primary_key",
                key,
                f"a key column must be integer, text, date or timestamp, not {column.type}",
            )
        if column.nullable:
            raise DeclarationError("primary_key", key, "a key column cannot be nullable")
    return tuple(keys)


def read_cursor(raw: object, by_name: Mapping[str, Column], *, present: bool = True) -> str | None:
    """The change stamp, or None for an explicit ``cursor: null`` (no change stamp)."""
    if raw is None and present:
        return None
    if not isinstance(raw, str) or raw not in by_name:
        raise DeclarationError(
            "cursor",
            raw,
            "required: a declared column of type timestamp or date (the change stamp), "
            "or null for a table without one (every run then compares the whole table)",
        )
    column = by_name[raw]
    if column.type.kind not in (*CURSOR_KINDS, "integer"):
        raise DeclarationError(
            "cursor",
            raw,
            f"the cursor must be a timestamp or a date (a change stamp) or an integer (an "
            f"id that only grows), not {column.type}",
        )
    if column.nullable:
        raise DeclarationError(
            "cursor",
            raw,
            "the cursor cannot be nullable: every row needs one to be read incrementally",
        )
    return raw


# An append-only table's runs read again the ids this far below the watermark: ids are
# handed out when a row is inserted and seen when its transaction commits, so a lower id
# can commit after a higher one was read (docs/contract.md says why 1,000).
LOOKBACK_IDS = 1_000


def _counts_ids(by_name: Mapping[str, Column], cursor: str | None) -> bool:
    return cursor is not None and by_name[cursor].type.kind == "integer"


def read_lookbacks(
    attributes: Mapping, by_name: Mapping[str, Column], cursor: str | None
) -> int | None:
    """``lookback_ids`` of an integer cursor (its default when not given), None for any
    other; a lookback that does not fit the cursor is refused."""
    ids = _counts_ids(by_name, cursor)
    days, given = attributes.get("lookback_days"), attributes.get("lookback_ids")
    if days is not None and (cursor is None or ids):
        raise DeclarationError(
            "lookback_days",
            days,
            "a table without a cursor is read whole on every run: there is nothing to look "
            "back over; leave it out"
            if cursor is None
            else "an integer cursor looks back in ids: use lookback_ids",
        )
    if given is not None and not ids:
        raise DeclarationError(
            "lookback_ids",
            given,
            "only an integer cursor looks back in ids; a change stamp looks back in days "
            "(lookback_days)",
        )
    if given is None:
        return LOOKBACK_IDS if ids else None
    if isinstance(given, bool) or not isinstance(given, int) or given < 0:
        raise DeclarationError("lookback_ids", given, "a whole number of ids, 0 or more")
    return given


def read_day_column(raw: object, by_name: Mapping[str, Column], cursor: str | None) -> str | None:
    """The column a row's day is read from, or None: the cursor's (the default, and a
    ``day_column`` naming the cursor itself). Required without a cursor."""
    if raw is None and (cursor is None or _counts_ids(by_name, cursor)):
        raise DeclarationError(
            "day_column",
            raw,
            f"required with cursor: {'null' if cursor is None else cursor} (no change "
            "stamp): the timestamp or date column whose day each row belongs to",
        )
    if raw is None or raw == cursor:
        return None
    if not isinstance(raw, str) or raw not in by_name:
        raise DeclarationError(
            "day_column",
            raw,
            "a declared column of type timestamp or date (the day each row belongs to), "
            "or leave it out: the day of the cursor",
        )
    column = by_name[raw]
    if column.type.kind not in CURSOR_KINDS:
        raise DeclarationError(
            "day_column",
            raw,
            f"a row's day must come from a timestamp or a date, not {column.type}",
        )
    if column.nullable:
        raise DeclarationError(
            "day_column",
            raw,
            "the day column cannot be nullable: every row needs a day to be in a day's file",
        )
    return raw


def read_daily_files(
    raw: object, by_name: Mapping[str, Column], primary_key: tuple[str, ...], tz: tzinfo
) -> tuple[DailyFiles, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise DeclarationError("daily_files", raw, "a list of daily files")
    out = []
    for i, item in enumerate(raw):
        at = f"daily_files[{i}]"
        if not isinstance(item, Mapping):
            raise DeclarationError(at, item, "a mapping with name, where, columns, url, totals")
        extra = set(item) - {"name", "where", "columns", "url", "totals", "format"}
        if extra:
            key = sorted(extra)[0]
            raise DeclarationError(
                f"{at}.{key}",
                item[key],
                "unknown; a daily file takes name, where, columns, url, totals and format",
            )
        name = item.get("name")
        check_name(f"{at}.name", name)
        where = _where(item.get("where"), by_name, f"{at}.where", tz)
        columns = item.get("columns")
        if columns is None:
            columns = list(by_name)
        if (
            not isinstance(columns, list)
            or not columns
            or not all(isinstance(c, str) for c in columns)
        ):
            raise DeclarationError(f"{at}.columns", columns, "a list of declared columns")
        for column in columns:
            if column not in by_name:
                raise DeclarationError(f"{at}.columns", column, "is not a declared column")
        if len(set(columns)) != len(columns):
            raise DeclarationError(f"{at}.columns", columns, "names a column twice")
        missing = [k for k in primary_key if k not in columns]
        if missing:
            raise DeclarationError(
                f"{at}.columns",
                columns,
                f"must hold the key "
                f"({', '.join(missing)}): a day file's rows are told apart "
                "and sorted by it",
            )
        url = item.get("url")
        if url is not None and (not isinstance(url, str) or not url.strip()):
            raise DeclarationError(
                f"{at}.url", url, "a folder path or an fsspec URL (s3://bucket/prefix)"
            )
        totals = _totals(item.get("totals"), by_name, columns, f"{at}.totals")
        form = item.get("format", "json")
        if form not in FILE_FORMATS:
            raise DeclarationError(f"{at}.format", form, "json or parquet")
        url = url.strip() if url else None
        out.append(DailyFiles(name, where, tuple(columns), url, totals, form))
    return tuple(out)


def _where(
    raw: object, by_name: Mapping[str, Column], at: str, tz: tzinfo
) -> tuple[tuple[str, tuple], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, Mapping):
        raise DeclarationError(
            at, raw, "a mapping of column to a value or a list of values (status: captured)"
        )
    out = []
    for column, values in raw.items():
        path = f"{at}.{column}"
        if column not in by_name:
            raise DeclarationError(path, column, "is not a declared column")
        listed = values if isinstance(values, list) else [values]
        if not listed:
            raise DeclarationError(path, values, "needs at least one value")
        parsed = []
        for value in listed:
            if value is None:
                parsed.append(None)
                continue
            if by_name[column].type.kind == "boolean" and not _boolean_word(value):
                raise DeclarationError(
                    path, value, "not a boolean: write true or false (or 1/0, t/f)"
                )
            try:
                parsed.append(by_name[column].type.parse(value, tz))
            except TypeValueError as exc:
                raise DeclarationError(
                    path, value, f"not a {by_name[column].type} ({exc.reason})"
                ) from None
        out.append((column, tuple(parsed)))
    return tuple(out)


def _boolean_word(value: object) -> bool:
    """Whether a filter value is one of the booleans a declaration may write: true/false
    (YAML's own, or as text), 1/0 and t/f; a ``yes`` is refused, not guessed."""
    if isinstance(value, bool):
        return True
    if isinstance(value, int):
        return value in (0, 1)
    return isinstance(value, str) and value.strip().lower() in ("true", "false", "t", "f", "1", "0")


def _totals(
    raw: object, by_name: Mapping[str, Column], columns: list[str], at: str
) -> Totals | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping) or set(raw) - {"name", "sum"}:
        raise DeclarationError(at, raw, "a mapping with name and sum")
    check_name(f"{at}.name", raw.get("name"))
    summed = raw.get("sum", [])
    summed = [summed] if isinstance(summed, str) else summed
    if not isinstance(summed, list):
        raise DeclarationError(f"{at}.sum", summed, "a list of numeric columns")
    for column in summed:
        if column not in by_name:
            raise DeclarationError(f"{at}.sum", column, "is not a declared column")
        if not by_name[column].type.numeric:
            raise DeclarationError(
                f"{at}.sum",
                column,
                f"a sum needs a numeric column "
                f"(integer, decimal, float), not {by_name[column].type}",
            )
        if column not in columns:
            raise DeclarationError(
                f"{at}.sum",
                column,
                "is not one of the file's columns (the totals are read from the files)",
            )
        if column in TOTALS_OWN:
            raise DeclarationError(
                f"{at}.sum",
                column,
                f"the totals keep the names {' and '.join(TOTALS_OWN)} for the day and the row "
                "count (their table's columns, their metadata), so they cannot sum a column "
                "of that name",
            )
        if f"{column}_exact" in summed:
            raise DeclarationError(
                f"{at}.sum",
                f"{column}_exact",
                f"the totals' metadata names {column}'s exact sum {column}_exact, so they "
                "cannot also sum a column of that name",
            )
    return Totals(raw["name"], tuple(summed))
