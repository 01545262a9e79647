"""A declared table: the one object every layer takes instead of naming a column.

:class:`TableSpec` and its parts (:class:`Column`, :class:`DailyFiles`, :class:`Totals`,
:class:`Names`, :class:`FileNames`) are defined in :mod:`.spec` (which says what a
declaration holds).

:func:`declare` builds one from the attributes of a ``defs.yaml`` (plain values, as YAML
gives them), checking everything a run would otherwise trip over later: an unknown
type, a key or filter column that is not declared, a sum over text, a name that is not
a valid asset name or that is one of the pipeline's own tables. Each refusal is a
:class:`DeclarationError` naming the attribute's path (``columns.amount_cents``,
``daily_files[0].where.status``) and the value. The columns, key, change stamp and daily
files are read by :mod:`.parts`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import tzinfo
from functools import cache

from ..errors import DeclarationError
from ..times import UTC
from .orders import LEGACY, ORDERS_ATTRIBUTES
from .parts import (
    check_name,
    read_columns,
    read_cursor,
    read_daily_files,
    read_day_column,
    read_lookbacks,
    read_primary_key,
)
from .spec import TableSpec

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
        tuple((f.name, f.where, f.columns, f.totals, f.format) for f in spec.daily_files),
    )


@cache
def _orders_shape() -> tuple:
    return _shape(_declare(ORDERS_ATTRIBUTES, UTC, None))


ATTRIBUTES = frozenset(
    {
        "table",
        "name",
        "source_url",
        "primary_key",
        "cursor",
        "day_column",
        "columns",
        "lookback_days",
        "lookback_ids",
        "reconcile_days",
        "max_delete_share",
        "daily_files",
    }
)


def _declare(attributes: Mapping, tz: tzinfo, where: str | None) -> TableSpec:
    if not isinstance(attributes, Mapping):
        raise DeclarationError("attributes", attributes, "a declaration is a mapping")
    _refuse_placeholders(attributes)
    for key in attributes:
        if key not in ATTRIBUTES:
            raise DeclarationError(
                str(key),
                attributes[key],
                "unknown attribute; the attributes are " + ", ".join(sorted(ATTRIBUTES)),
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
    check_name("name", name)
    columns = read_columns(attributes.get("columns"))
    by_name = {c.name: c for c in columns}
    primary_key = read_primary_key(attributes.get("primary_key"), by_name)
    cursor = read_cursor(attributes.get("cursor"), by_name, present="cursor" in attributes)
    day_column = read_day_column(attributes.get("day_column"), by_name, cursor)
    lookback_ids = read_lookbacks(attributes, by_name, cursor)
    files = read_daily_files(attributes.get("daily_files"), by_name, primary_key, tz)
    spec = TableSpec(
        name=name,
        table=table,
        primary_key=primary_key,
        cursor=cursor,
        day_column=day_column,
        columns=columns,
        daily_files=files,
        source_url=_optional_text(attributes, "source_url"),
        lookback_days=_days(attributes, "lookback_days"),
        lookback_ids=lookback_ids,
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
    "cursor": "the column the app stamps on every change of a row (a timestamp or a date), "
    "or null for a table without one (and a day_column beside it)",
    "columns": "the source table's columns, each with its type (payment_id: integer)",
    "day_column": "the timestamp or date column whose day each row belongs to",
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
