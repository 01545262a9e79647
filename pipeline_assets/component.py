"""``pipeline_assets.IncrementalTable``: a table declared in a ``defs.yaml``, as a component.

The attributes are those of docs/contract.md ("Declared tables"); they are checked by
:func:`~pipeline_assets.core.table.declare.declare`, which names the attribute's path and the
value of any mistake, when the definitions load (``dg check defs``, ``dagster dev``).

No `from __future__ import annotations` here: Dagster and pydantic read the annotations
at runtime.
"""

from pathlib import Path
from typing import Any, Optional, Union

import dagster as dg
import yaml
from pydantic import Field

from pipeline_assets.core.table.declare import check_apart, declare, taken_names
from pipeline_assets.core.table.spec import TableSpec

from . import settings as settings_module

TYPE_NAME = "pipeline_assets.IncrementalTable"


class IncrementalScaffolder(dg.Scaffolder):
    """``dg scaffold defs pipeline_assets.IncrementalTable payments``: a ``defs.yaml`` to
    complete, with the table's columns, key and change stamp read from the source when
    ``SOURCE_DATABASE_URL`` (or ``--json-params '{"source_url": …}'``) reaches it."""

    @classmethod
    def get_scaffold_params(cls):
        return ScaffoldParams

    def scaffold(self, request: dg.ScaffoldRequest) -> None:
        from .core.scaffold import draft_declaration, render

        params = request.params if isinstance(request.params, ScaffoldParams) else ScaffoldParams()
        table = params.table or Path(request.target_path).name
        url = params.source_url or settings_module.from_env().source_url
        draft = draft_declaration(url, table)
        if params.source_url:
            draft.attributes["source_url"] = params.source_url
        request.target_path.mkdir(parents=True, exist_ok=True)
        (request.target_path / "defs.yaml").write_text(render(draft, TYPE_NAME), encoding="utf-8")


class ScaffoldParams(dg.Model):
    table: Optional[str] = Field(  # noqa: UP045 - pydantic reads it at runtime
        default=None, description="the source table (default: the folder's name)"
    )
    source_url: Optional[str] = Field(  # noqa: UP045
        default=None, description="SQLAlchemy URL of the source (default SOURCE_DATABASE_URL)"
    )


@dg.scaffold_with(IncrementalScaffolder)
class IncrementalTable(dg.Component, dg.Model, dg.Resolvable):
    """An app table loaded incrementally into the warehouse (tie-safe watermark with a
    lookback, one transaction per batch, deletions by range load under a guard), with
    optional daily files of a filtered view, each with a manifest and per-day totals."""

    table: str = Field(description="the source table (schema-qualified allowed)")
    name: Optional[str] = Field(  # noqa: UP045
        default=None, description="asset and warehouse table name (default: table, unqualified)"
    )
    source_url: Optional[str] = Field(  # noqa: UP045
        default=None, description="SQLAlchemy URL of the source (default SOURCE_DATABASE_URL)"
    )
    primary_key: Union[str, list[str]] = Field(  # noqa: UP007
        description="the key: one column or a list of columns"
    )
    cursor: Optional[str] = Field(  # noqa: UP045
        description="the change stamp (timestamp or date): the watermark, and by default "
        "the day a row belongs to; an integer id that only grows (an append-only table); "
        "or null for a table without either (every run compares it whole). The last two "
        "need day_column"
    )
    day_column: Optional[str] = Field(  # noqa: UP045
        default=None,
        description="the timestamp or date column whose day a row belongs to, where it is "
        "not the cursor (a payment's captured_at): day files, totals, verify and range loads",
    )
    columns: dict[str, Any] = Field(
        description="column: type (integer, text, decimal, decimal(P,S), float, boolean, "
        "date, timestamp), or {type: …, nullable: true}"
    )
    lookback_days: Optional[int] = Field(default=None)  # noqa: UP045
    lookback_ids: Optional[int] = Field(  # noqa: UP045
        default=None, description="an integer cursor's lookback, in ids (default 1000)"
    )
    reconcile_days: Optional[int] = Field(default=None)  # noqa: UP045
    max_delete_share: Optional[float] = Field(default=None)  # noqa: UP045
    daily_files: Optional[list[dict[str, Any]]] = Field(  # noqa: UP045
        default=None,
        description="daily files of a filtered view: name, where, columns, url, totals, "
        "format (json or parquet)",
    )

    def spec(self, where: str = "") -> TableSpec:
        """The declaration, checked; a mistake names ``where`` (the file), the attribute
        and the value."""
        attributes = self.model_dump(exclude_none=True)
        attributes["cursor"] = self.cursor  # explicit, null included (cursor: null)
        return declare(attributes, tz=settings_module.from_env().tz, where=where or None)

    def build_defs(self, context: dg.ComponentLoadContext) -> dg.Definitions:
        where = _declaration_file(context)
        spec = self.spec(str(where))
        check_apart(_siblings(context, where, spec))
        from .definitions import build_definitions

        return build_definitions(
            settings_module.from_env(), spec=spec, module=_location_module(context)
        )


def _declaration_file(context: dg.ComponentLoadContext) -> Path:
    path = Path(context.path)
    found = path / "defs.yaml" if path.is_dir() else path
    try:
        return found.relative_to(Path(context.project_root))
    except ValueError:
        return found


def _siblings(
    context: dg.ComponentLoadContext, where: Path, spec: TableSpec
) -> list[tuple[str, TableSpec]]:
    """This declaration and the names every other IncrementalTable of the project takes,
    read from their files (so two of them fail on the first to load, naming both)."""
    out: list[tuple[str, Any]] = [(str(where), spec)]
    root = Path(context.project_root)
    for other in sorted(Path(context.defs_module_path).rglob("defs.yaml")):
        shown = other.relative_to(root) if other.is_relative_to(root) else other
        if str(shown) == str(where):
            continue
        try:
            documents = list(yaml.safe_load_all(other.read_text(encoding="utf-8")))
        except (OSError, yaml.YAMLError):
            continue  # its own load reports it
        for document in documents:
            if isinstance(document, dict) and document.get("type") == TYPE_NAME:
                out.append((str(shown), taken_names(document.get("attributes") or {})))
    return out


def _location_module(context: dg.ComponentLoadContext) -> str:
    """The code location the printed commands name: the project's ``<root>.definitions``
    (``shop.defs`` → ``shop.definitions``), as ``dg`` loads it."""
    root = context.defs_module_name.rpartition(".")[0] or context.defs_module_name
    return f"{root}.definitions"
