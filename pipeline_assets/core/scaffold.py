"""A first draft of a declaration, read from the source table when it can be reached.

``dg scaffold defs pipeline_assets.IncrementalTable payments`` writes what
:func:`render` makes of :func:`draft_declaration`: the columns with the types their
database gives them, the primary key, and a change stamp guessed from the columns'
names. A column the database calls text is looked at more closely, through a sample of
its values (:data:`SAMPLE_ROWS`): when every value sampled is an exact decimal (``12.50``),
a date or an ISO-8601 timestamp, that type is proposed instead, and a comment on its line
says why. What cannot be known is left for the user, with a placeholder that fails loudly
when the definitions load (``CHANGE_ME``: :func:`.table.declare.declare` says which and what to
write) rather than a guess that loads silently.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date

import sqlalchemy as sa
import yaml

from .db.engines import make_engine
from .errors import PipelineError, TypeValueError
from .table.codecs.decimals import DECIMAL_TEXT
from .table.declare import PLACEHOLDER as CHANGE_ME
from .table.types import TIMESTAMP
from .times import UTC

# Names apps give their change stamp, most telling first.
_STAMPS = (
    "updated_at",
    "modified_at",
    "last_modified",
    "changed_at",
    "updated",
    "modified",
    "last_update",
    "created_at",
)
_EXAMPLE = {
    "table": CHANGE_ME,
    "primary_key": CHANGE_ME,
    "cursor": CHANGE_ME,
    "columns": {CHANGE_ME: "integer"},
}
SAMPLE_ROWS = 1_000  # values of each text column looked at (the first the database gives)
DECIMAL_PRECISION = 18  # a proposed decimal(P,S) has room for this many digits at least
_DECIMAL = re.compile(DECIMAL_TEXT)
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


@dataclass
class Draft:
    """A draft declaration: its ``attributes``, and a comment for some columns' lines
    (``notes``: why a type was proposed that the database does not say)."""

    attributes: dict
    notes: dict[str, str] = field(default_factory=dict)


def column_type(sql_type: sa.types.TypeEngine) -> str:
    """The declared type for a column the database reports as ``sql_type``."""
    if isinstance(sql_type, sa.Boolean):
        return "boolean"
    if isinstance(sql_type, sa.Integer):
        return "integer"
    if isinstance(sql_type, sa.Float):  # before Numeric: Float is a Numeric in SQLAlchemy
        return "float"
    if isinstance(sql_type, sa.Numeric):
        precision, scale = sql_type.precision, sql_type.scale
        if precision is not None and scale is not None:
            return f"decimal({precision},{scale})"
        return "decimal"
    if isinstance(sql_type, sa.DateTime):
        return "timestamp"
    if isinstance(sql_type, sa.Date):
        return "date"
    return "text"


def suggest_declaration(url: str | None, table: str) -> dict:
    """The attributes of :func:`draft_declaration`."""
    return draft_declaration(url, table).attributes


def draft_declaration(url: str | None, table: str) -> Draft:
    """A declaration of ``table``, read from the source at ``url``; the bare example
    (placeholders to fill) when the source or the table is not there."""
    attributes = dict(_EXAMPLE, table=table)
    if not url:
        return Draft(attributes)
    schema, _, name = table.rpartition(".")
    try:
        engine = make_engine(url, role="source")
        try:
            inspector = sa.inspect(engine)
            reflected = inspector.get_columns(name, schema=schema or None)
            key = inspector.get_pk_constraint(name, schema=schema or None)
            texts = [c["name"] for c in reflected if column_type(c["type"]) == "text"]
            samples = _sample(engine, schema, name, texts)
        finally:
            engine.dispose()
    except (PipelineError, sa.exc.SQLAlchemyError):
        return Draft(attributes)  # unreachable or no such table: the user fills it in
    keys = list(key.get("constrained_columns") or [])
    columns: dict = {}
    notes: dict[str, str] = {}
    for column in reflected:
        kind = column_type(column["type"])
        if kind == "text" and samples.get(column["name"]):
            kind, notes[column["name"]] = _from_values(kind, samples[column["name"]])
        columns[column["name"]] = (
            {"type": kind, "nullable": True}
            if column.get("nullable") and column["name"] not in keys
            else kind
        )
    for name in _STAMPS:  # a stamp kept as ISO text (SQLite has no other way), no rows yet
        if _kind(columns.get(name)) == "text" and not samples.get(name):
            columns[name] = _with_kind(columns[name], "timestamp")
    stamps = [c for c in _STAMPS if c in columns and _kind(columns[c]) in ("timestamp", "date")]
    attributes.update(
        primary_key=(keys[0] if len(keys) == 1 else keys) if keys else CHANGE_ME,
        cursor=stamps[0] if stamps else CHANGE_ME,
        columns=columns or _EXAMPLE["columns"],
    )
    growing = None if stamps else _growing_id(reflected, keys)
    if growing is not None:  # no stamp, an id the database hands out: an append-only table
        days = [c for c, kind in columns.items() if kind in ("timestamp", "date") and c != growing]
        attributes = {
            **{k: v for k, v in attributes.items() if k != "columns"},
            "cursor": growing,
            "day_column": days[0] if days else CHANGE_ME,
            "columns": attributes["columns"],
        }
        notes[growing] = (
            "numbered by the database and no change stamp: declared append-only (the "
            "cursor); if the app changes rows in place, declare cursor: null instead"
        )
    return Draft(attributes, {k: v for k, v in notes.items() if v})


def _growing_id(reflected: list[dict], keys: list[str]) -> str | None:
    """The key, when it is one integer column the database numbers itself: an
    autoincrement or identity column (PostgreSQL, MySQL), or SQLite's ``INTEGER PRIMARY
    KEY`` (its rowid)."""
    if len(keys) != 1:
        return None
    (column,) = [c for c in reflected if c["name"] == keys[0]]
    if column_type(column["type"]) != "integer":
        return None
    sqlite_rowid = "autoincrement" not in column and str(column["type"]).upper() == "INTEGER"
    return keys[0] if column.get("autoincrement") is True or sqlite_rowid else None


def _sample(engine: sa.Engine, schema: str, name: str, columns: list[str]) -> dict[str, list]:
    """The first :data:`SAMPLE_ROWS` values of each text column that are not NULL."""
    if not columns:
        return {}
    quote = engine.dialect.identifier_preparer.quote
    table = f"{quote(schema)}.{quote(name)}" if schema else quote(name)
    out: dict[str, list] = {}
    with engine.connect() as conn:
        for column in columns:
            values = conn.exec_driver_sql(
                f"SELECT {quote(column)} FROM {table} WHERE {quote(column)} IS NOT NULL "
                f"LIMIT {SAMPLE_ROWS}"
            ).scalars()
            out[column] = list(values)
    return out


def _from_values(kind: str, values: list) -> tuple[str, str]:
    """The type every one of ``values`` (a text column's sample) reads as, and why: a
    decimal(P,S) when all are exact decimals and some have places, a date, a timestamp;
    else ``kind`` as it was, with no comment."""
    if not all(isinstance(v, str) for v in values):
        return kind, ""  # a SQLite column of mixed storage: leave it to the user
    texts = [v.strip() for v in values]
    sampled = f"the {len(texts)} value(s) sampled"
    if all(_DECIMAL.fullmatch(t) for t in texts) and any("." in t for t in texts):
        scale = max(len(t.partition(".")[2]) for t in texts)
        whole = max(len(t.lstrip("+-").partition(".")[0].lstrip("0") or "0") for t in texts)
        precision = max(DECIMAL_PRECISION, whole + scale)
        return f"decimal({precision},{scale})", (
            f"text in the source; {sampled} are all exact decimals with up to {scale} "
            f"place(s): check the precision ({precision} digits) fits"
        )
    if all(_DATE.fullmatch(t) and _is_date(t) for t in texts):
        return "date", f"text in the source; {sampled} are all dates (YYYY-MM-DD)"
    if all(_is_timestamp(t) for t in texts):
        return "timestamp", (
            f"text in the source; {sampled} all read as ISO-8601 timestamps (one "
            "without an offset is read in PIPELINE_TIMEZONE)"
        )
    return kind, ""


def _is_date(text: str) -> bool:
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True


def _is_timestamp(text: str) -> bool:
    try:
        TIMESTAMP.parse(text, UTC)
    except TypeValueError:
        return False
    return True


def _kind(declared) -> str | None:
    return declared["type"] if isinstance(declared, dict) else declared


def _with_kind(declared, kind: str):
    return {**declared, "type": kind} if isinstance(declared, dict) else kind


def render(draft: Draft, type_name: str) -> str:
    """The ``defs.yaml`` of a draft: the component's type and the attributes, each column
    with a note carrying it as a comment at the end of its line."""
    text = yaml.safe_dump(
        {"type": type_name, "attributes": draft.attributes},
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
    )
    if not draft.notes:
        return text
    lines = text.splitlines()
    start = lines.index("  columns:") + 1
    for name, note in draft.notes.items():
        key = yaml.safe_dump({name: 0}, allow_unicode=True).rstrip("\n")[: -len(": 0")]
        for i in range(start, len(lines)):
            if lines[i].startswith(f"    {key}:"):
                lines[i] += f"  # {note}"
                break
    return "\n".join(lines) + "\n"
