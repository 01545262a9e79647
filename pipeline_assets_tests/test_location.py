"""A code location's tables, found as the ``dagster`` CLI's ``-m`` finds its definitions:
what ``pipeline-assets … -m MODULE`` runs against must be what Dagster runs."""

from __future__ import annotations

import importlib
import sys
import textwrap
from pathlib import Path

import pytest

from pipeline_assets.core.errors import LocationError
from pipeline_assets.core.table import ORDERS
from pipeline_assets.core.table.orders import ORDERS_ATTRIBUTES
from pipeline_assets.location import declared_tables

from .support import dg_project
from .tables import PAYMENTS, PAYMENTS_ATTRIBUTES


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A folder to write a user's package in, importable from the working directory as
    ``dagster -m`` imports it; its modules forgotten afterwards."""
    monkeypatch.chdir(tmp_path)
    for name in ("PIPELINE_DATA_DIR", "SOURCE_DATABASE_URL", "PAID_ORDERS_URL"):
        monkeypatch.delenv(name, raising=False)
    _forget_users_modules()  # a test before, on this worker, may have left its own `shop`
    importlib.invalidate_caches()
    yield tmp_path
    _forget_users_modules()


def _forget_users_modules() -> None:
    for name in list(sys.modules):
        if name.split(".")[0] in ("shop", "plain_location", "two_locations"):
            del sys.modules[name]


def test_this_projects_location_declares_orders_as_it_is():
    assert declared_tables("pipeline_assets.definitions") == {"orders": ORDERS}
    assert declared_tables()["orders"].attributes == ORDERS_ATTRIBUTES


def _dg_project(root: Path, tables: dict[str, dict]) -> None:
    """A user's project as Dagster's docs lay it out, its package ``shop``."""
    dg_project(root, tables, package="shop")


def test_a_users_dg_project_declares_each_of_its_tables(project):
    _dg_project(project, {"orders": ORDERS_ATTRIBUTES, "payments": PAYMENTS_ATTRIBUTES})
    assert declared_tables("shop.definitions") == {"orders": ORDERS, "payments": PAYMENTS}


def test_a_source_url_is_read_from_the_location_not_shown_in_metadata(project):
    url = f"sqlite:///{project / 'payments.db'}"
    _dg_project(project, {"payments": PAYMENTS_ATTRIBUTES | {"source_url": url}})
    assert declared_tables("shop.definitions")["payments"].source_url == url


def test_a_definitions_object_at_module_scope_is_found_too(project):
    (project / "plain_location.py").write_text(
        textwrap.dedent("""\
        from pipeline_assets.definitions import build_definitions
        from pipeline_assets.settings import from_env

        defs = build_definitions(from_env())
        """)
    )
    assert declared_tables("plain_location") == {"orders": ORDERS}


def test_a_module_that_is_not_one_location_is_refused_naming_what_it_found(project):
    (project / "two_locations.py").write_text(
        textwrap.dedent("""\
        import dagster as dg

        a = dg.Definitions()
        b = dg.Definitions()
        """)
    )
    with pytest.raises(LocationError, match="two_locations.a, two_locations.b"):
        declared_tables("two_locations")
    with pytest.raises(LocationError, match="cannot import the code location 'nowhere'"):
        declared_tables("nowhere")
