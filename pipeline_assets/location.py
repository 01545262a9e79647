"""The tables a code location declares, read back from its definitions.

Each table asset carries its declaration in its metadata (:data:`DECLARATION`: the plain
attributes it was declared from), so anything that can load a location (the
``pipeline-assets`` CLI's ``-m MODULE``) finds its tables the way the ``dagster`` CLI
finds its definitions, and declares each again with :func:`~.core.spec.declare`.

A declaration's ``source_url`` is shown in that metadata without its password
(the UI shows metadata); the URL itself is read from the location's resource of that
table (``source_<name>``). A daily file without its own ``url`` lives where
:func:`.settings.files_location` says (``PAID_ORDERS_URL`` for ``orders``' files, else
``<PIPELINE_DATA_DIR>/<name>``), as in the location itself.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from collections.abc import Mapping

import dagster as dg
from dagster.components.definitions import LazyDefinitions

from pipeline_assets.core.table.declare import declare
from pipeline_assets.core.table.spec import TableSpec

from . import settings as settings_module
from .core.errors import LocationError
from .core.secrets import redact
from .io_manager import DECLARED_IN  # the defs.yaml a table is declared in

DECLARATION = "pipeline_assets/declaration"

DEFAULT_MODULE = "pipeline_assets.definitions"


def shown_attributes(spec: TableSpec) -> dict:
    """The attributes a table asset carries: its declaration, the source URL's password
    hidden."""
    shown = dict(spec.attributes or {})
    if shown.get("source_url"):
        shown["source_url"] = redact(shown["source_url"])
    return shown


def declaration_metadata(spec: TableSpec) -> dict:
    """The metadata a table asset carries about its declaration: the attributes, and the
    file they are declared in (when they are: ``orders`` is declared in code)."""
    out = {DECLARATION: dg.MetadataValue.json(shown_attributes(spec))}
    if spec.declared_in:
        out[DECLARED_IN] = spec.declared_in
    return out


def source_resource_key(spec: TableSpec) -> str:
    """``source`` (SOURCE_DATABASE_URL, shared by every table without its own), or
    ``source_<name>`` for a table that declares its ``source_url``."""
    return "source" if spec.source_url is None else f"source_{spec.name}"


def declared_tables(module: str = DEFAULT_MODULE) -> dict[str, TableSpec]:
    """``{name: spec}`` of every table the code location ``module`` declares (as
    ``dagster … -m MODULE`` loads it: its ``Definitions``, or its function decorated with
    ``@dg.definitions``), in the order of their names."""
    return tables_of(location_definitions(module))


def location_definitions(module: str) -> dg.Definitions:
    """The ``Definitions`` of ``module``, found as the ``dagster`` CLI's ``-m`` finds them:
    the one function decorated with ``@dg.definitions`` (called), else the one
    ``Definitions`` attribute. The working directory is importable, as for ``dagster``."""
    here = os.getcwd()
    added = here not in sys.path
    if added:
        sys.path.insert(0, here)
    try:
        loaded = importlib.import_module(module)
    except ImportError as exc:
        raise LocationError(
            f"cannot import the code location {module!r} ({exc}); name "
            "the module as `dagster dev -m` does, from the folder its "
            "package is importable from"
        ) from None
    finally:
        if added and here in sys.path:
            sys.path.remove(here)
    lazy = [(n, v) for n, v in inspect.getmembers(loaded) if isinstance(v, LazyDefinitions)]
    found = lazy or [(n, v) for n, v in inspect.getmembers(loaded) if isinstance(v, dg.Definitions)]
    if len(found) != 1:
        what = (
            "no Definitions object nor @dg.definitions function"
            if not found
            else "several: " + ", ".join(f"{module}.{n}" for n, _ in found)
        )
        raise LocationError(
            f"the code location {module!r} must hold one Definitions "
            f"object or one function decorated with @dg.definitions; "
            f"found {what}"
        )
    name, target = found[0]
    if isinstance(target, LazyDefinitions):
        if target.has_context_arg:
            raise LocationError(
                f"{module}.{name} takes a ComponentLoadContext: load it "
                "through `dg` (load_from_defs_folder), or give the "
                "function no parameter"
            )
        return target()
    return target


def tables_of(defs: dg.Definitions) -> dict[str, TableSpec]:
    """Every table declared in ``defs``, declared again from its asset's metadata."""
    tz = settings_module.from_env().tz
    resources: Mapping = defs.resources or {}
    out: dict[str, TableSpec] = {}
    for asset in defs.resolve_all_asset_specs():
        held = asset.metadata.get(DECLARATION)
        if held is None:
            continue
        attributes = dict(held.value if isinstance(held, dg.MetadataValue) else held)
        where = asset.metadata.get(DECLARED_IN)
        where = (where.value if isinstance(where, dg.MetadataValue) else where) or None
        spec = declare(attributes, tz=tz, where=where)
        if spec.source_url is not None:
            url = _url(resources.get(source_resource_key(spec)))
            spec = declare({**attributes, "source_url": url}, tz=tz, where=where)
        out[spec.name] = spec
    return dict(sorted(out.items()))


def _url(resource) -> str:
    url = getattr(resource, "url", None)
    if isinstance(url, dg.EnvVar):
        return url.get_value()
    if not isinstance(url, str):
        raise LocationError(
            "a table declares its source_url, but the location holds no source resource for it"
        )
    return url
