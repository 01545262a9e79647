"""A first draft of a declaration, read from the source table when it can be reached.

``dg scaffold defs pipeline_assets.IncrementalTable payments`` writes what this returns:
the columns with the types their database gives them, the primary key, and a change
stamp guessed from the columns' names. What cannot be known is left for the user, with
a placeholder that fails loudly (``CHANGE_ME``) rather than a guess that loads silently.
"""

from __future__ import annotations

import sqlalchemy as sa

from .db import make_engine
from .errors import PipelineError

CHANGE_ME = "CHANGE_ME"
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
    """The attributes of a declaration of ``table``, read from the source at ``url``;
    the bare example (placeholders to fill) when the source or the table is not there."""
    attributes = dict(_EXAMPLE, table=table)
    if not url:
        return attributes
    schema, _, name = table.rpartition(".")
    try:
        engine = make_engine(url, role="source")
        try:
            inspector = sa.inspect(engine)
            reflected = inspector.get_columns(name, schema=schema or None)
            key = inspector.get_pk_constraint(name, schema=schema or None)
        finally:
            engine.dispose()
    except (PipelineError, sa.exc.SQLAlchemyError):
        return attributes  # unreachable or no such table: the user fills it in
    columns: dict = {}
    for column in reflected:
        kind = column_type(column["type"])
        columns[column["name"]] = (
            {"type": kind, "nullable": True}
            if column.get("nullable")
            and column["name"] not in (key.get("constrained_columns") or [])
            else kind
        )
    keys = list(key.get("constrained_columns") or [])
    for name in _STAMPS:  # a stamp kept as ISO text (SQLite has no other way) is one still
        if columns.get(name) == "text":
            columns[name] = "timestamp"
    stamps = [c for c in _STAMPS if c in columns and _kind(columns[c]) in ("timestamp", "date")]
    attributes.update(
        primary_key=(keys[0] if len(keys) == 1 else keys) if keys else CHANGE_ME,
        cursor=stamps[0] if stamps else CHANGE_ME,
        columns=columns or _EXAMPLE["columns"],
    )
    return attributes


def _kind(declared) -> str:
    return declared["type"] if isinstance(declared, dict) else declared
