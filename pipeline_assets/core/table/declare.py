"""A declared table: the one object every layer takes instead of naming a column.

:class:`TableSpec` and its parts (:class:`Column`, :class:`DailyFiles`, :class:`Totals`,
:class:`Names`, :class:`FileNames`) are defined in :mod:`.spec` (which says what a
declaration holds) and imported from here, as every layer does.

:func:`declare` builds one from the attributes of a ``defs.yaml`` (plain values, as YAML
gives them), checking everything a run would otherwise trip over later: an unknown
type, a key or filter column that is not declared, a sum over text, a name that is not
a valid asset name or that is one of the pipeline's own tables. Each refusal is a
:class:`DeclarationError` naming the attribute's path (``columns.amount_cents``,
``daily_files[0].where.status``) and the value.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import tzinfo
from functools import cache

from ..errors import DeclarationError, TypeValueError, UnknownTypeError
from ..times import UTC
from . import working
from .orders import LEGACY, ORDERS_ATTRIBUTES
from .spec import Column, DailyFiles, TableSpec, Totals
from .types import ColumnType

# The warehouse tables the pipeline keeps for itself: no declaration may take their names.
OWN_TABLES = ("pipeline_watermark", "pipeline_watermark_history", "pipeline_batches")
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # a Dagster name that is also a SQL name
_MAX_NAME = 48  # room for suffixes (_match_source, _refresh_sensor) within SQL's 63
CURSOR_KINDS = ("timestamp", "date")
TOTALS_OWN = ("day", "rows")  # a totals table's own columns (core/daily_files/views.py)


# --- reading a declaration ----------------------------------------------------------------


def declare(attributes: Mapping, *, tz: tzinfo = UTC, where: str | None = None) -> TableSpec:
    """A :class:`TableSpec` from a declaration's attributes (as YAML gives them), or the
    first :class:`DeclarationError` found, naming the attribute's path and value (and
    ``where``, the file it is declared in, which the spec keeps: ``declared_in``)."""
    try:
        spec = _declare(attributes, tz, where)
    except DeclarationError as exc:
        raise exc.located(where) if where else exc from None
    return replace(spec, legacy=LEGACY) if _shape(spec) == _orders_shape() else spec


def _shape(spec: TableSpec) -> tuple:
    """What makes a declaration the chapter's ``orders``, whose :data:`.orders.LEGACY` it
    then carries: its names, key, change stamp, columns and daily files (their folders,
    source URL and day settings aside)."""
    return (
        spec.name,
        spec.table,
        spec.primary_key,
        spec.cursor,
        spec.columns,
        tuple((f.name, f.where, f.columns, f.totals) for f in spec.daily_files),
    )


@cache
def _orders_shape() -> tuple:
    return _shape(_declare(ORDERS_ATTRIBUTES, UTC, None))


def _declare(attributes: Mapping, tz: tzinfo, where: str | None) -> TableSpec:
    if not isinstance(attributes, Mapping):
        raise DeclarationError("attributes", attributes, "a declaration is a mapping")
    _refuse_placeholders(attributes)
    known = {
        "table",
        "name",
        "source_url",
        "primary_key",
        "cursor",
        "columns",
        "lookback_days",
        "reconcile_days",
        "max_delete_share",
        "daily_files",
    }
    for key in attributes:
        if key not in known:
            raise DeclarationError(
                str(key),
                attributes[key],
                "unknown attribute; the attributes are " + ", ".join(sorted(known)),
            )
    table = _required_text(attributes, "table")
    if not re.fullmatch(r"[^.\s\"`]+(\.[^.\s\"`]+)?", table):
        raise DeclarationError(
            "table",
            table,
            "a table name, optionally schema-qualified (shop.payments), without quotes or spaces",
        )
    name = attributes.get("name")
    name = table.rpartition(".")[2] if name is None else name
    _check_name("name", name)
    columns = _columns(attributes.get("columns"))
    by_name = {c.name: c for c in columns}
    primary_key = _primary_key(attributes.get("primary_key"), by_name)
    cursor = _cursor(attributes.get("cursor"), by_name)
    files = _daily_files(attributes.get("daily_files"), by_name, primary_key, tz)
    spec = TableSpec(
        name=name,
        table=table,
        primary_key=primary_key,
        cursor=cursor,
        columns=columns,
        daily_files=files,
        source_url=_optional_text(attributes, "source_url"),
        lookback_days=_days(attributes, "lookback_days"),
        reconcile_days=_days(attributes, "reconcile_days"),
        max_delete_share=_share(attributes, "max_delete_share"),
        attributes=json.loads(json.dumps(attributes, default=str)),
        declared_in=where,
    )
    seen: dict[str, str] = {}
    for path, taken in spec.taken_names().items():
        if taken in seen:
            raise DeclarationError(
                path, taken, f"is also {seen[taken]}; each asset needs a name of its own"
            )
        seen[taken] = path
    return spec


# What the scaffold writes where it could not tell (core/scaffold.py), and what to write.
PLACEHOLDER = "CHANGE_ME"
_FILL = {
    "table": "the source table's name",
    "primary_key": "the column, or the list of columns, whose values identify a row",
    "cursor": "the column the app stamps on every change of a row (a timestamp or a date)",
    "columns": "the source table's columns, each with its type (payment_id: integer)",
}


def _refuse_placeholders(attributes: Mapping) -> None:
    """A placeholder left in a declaration fails first, as what it is: saying which, what
    to write there, and how the scaffold fills it itself."""
    for path, _ in _leaves(attributes, ""):
        if path.rpartition(":")[2] != PLACEHOLDER:
            continue
        path = path.rpartition(":")[0]
        top = path.split(".")[0].split("[")[0]
        what = _FILL.get(top, "a value of the app's table")
        raise DeclarationError(
            path,
            PLACEHOLDER,
            f"a placeholder the scaffold left unfilled; replace it with {what}. The "
            "scaffold fills it itself from the app's database when it can reach it: run "
            "`dg scaffold defs pipeline_assets.IncrementalTable <folder>` again with "
            "SOURCE_DATABASE_URL set to it (or --json-params '{\"source_url\": ...}')",
        )


def _leaves(value: object, path: str):
    """``(path:text, value)`` of every text in a declaration, mapping keys included."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            inner = f"{path}.{key}" if path else str(key)
            if isinstance(key, str):
                yield f"{inner}:{key}", key
            yield from _leaves(item, inner)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _leaves(item, f"{path}[{i}]")
    elif isinstance(value, str):
        yield f"{path}:{value.strip()}", value


def taken_names(attributes: Mapping) -> dict[str, str]:
    """The names a declaration's raw attributes take, by attribute path, without checking
    the rest (a neighbour's file, read only to tell whether two declarations clash)."""
    out: dict[str, str] = {}
    table = attributes.get("table")
    name = attributes.get("name") or (table.rpartition(".")[2] if isinstance(table, str) else None)
    if isinstance(name, str):
        out["name"] = name
    files = attributes.get("daily_files")
    for i, item in enumerate(files if isinstance(files, list) else []):
        if isinstance(item, Mapping) and isinstance(item.get("name"), str):
            out[f"daily_files[{i}].name"] = item["name"]
            totals = item.get("totals")
            if isinstance(totals, Mapping) and isinstance(totals.get("name"), str):
                out[f"daily_files[{i}].totals.name"] = totals["name"]
    return out


def check_apart(specs: Sequence[tuple[str, TableSpec | dict[str, str]]]) -> None:
    """Refuse two declarations that take the same name: ``(where, spec)`` pairs, a spec
    given as a :class:`TableSpec` or as the :func:`taken_names` of its attributes."""
    owner: dict[str, tuple[str, str]] = {}
    for where, spec in specs:
        names = spec.taken_names() if isinstance(spec, TableSpec) else spec
        for path, taken in names.items():
            if taken in owner and owner[taken][0] != where:
                raise DeclarationError(
                    path,
                    taken,
                    f"is taken by {owner[taken][0]} ({owner[taken][1]}); "
                    "give one of them another name",
                    where=where,
                )
            owner.setdefault(taken, (where, path))


def _required_text(attributes: Mapping, key: str) -> str:
    value = attributes.get(key)
    if not isinstance(value, str) or not value.strip():
        raise DeclarationError(key, value, "required: a non-empty text")
    return value.strip()


def _optional_text(attributes: Mapping, key: str) -> str | None:
    value = attributes.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise DeclarationError(key, value, "a non-empty text, or leave it out")
    return value.strip()


def _check_name(path: str, name: object) -> None:
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


def _columns(raw: object) -> tuple[Column, ...]:
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


def _primary_key(raw: object, by_name: Mapping[str, Column]) -> tuple[str, ...]:
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


def _cursor(raw: object, by_name: Mapping[str, Column]) -> str:
    if not isinstance(raw, str) or raw not in by_name:
        raise DeclarationError(
            "cursor",
            raw,
            "required: a declared column of type timestamp or date (the change stamp)",
        )
    column = by_name[raw]
    if column.type.kind not in CURSOR_KINDS:
        raise DeclarationError(
            "cursor", raw, f"the change stamp must be a timestamp or a date, not {column.type}"
        )
    if column.nullable:
        raise DeclarationError(
            "cursor",
            raw,
            "the change stamp cannot be nullable: every row needs one to be read incrementally",
        )
    return raw


def _daily_files(
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
        extra = set(item) - {"name", "where", "columns", "url", "totals"}
        if extra:
            key = sorted(extra)[0]
            raise DeclarationError(
                f"{at}.{key}",
                item[key],
                "unknown; a daily file takes name, where, columns, url and totals",
            )
        name = item.get("name")
        _check_name(f"{at}.name", name)
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
        out.append(DailyFiles(name, where, tuple(columns), url.strip() if url else None, totals))
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
    _check_name(f"{at}.name", raw.get("name"))
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


def _days(attributes: Mapping, key: str) -> int | None:
    value = attributes.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise DeclarationError(key, value, "a whole number of days, 0 or more")
    return value


def _share(attributes: Mapping, key: str) -> float | None:
    value = attributes.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise DeclarationError(key, value, "a share between 0 and 1, such as 0.5")
    return float(value)
