"""Declarations: the table a user describes in a ``defs.yaml``, checked before any run.

A bad declaration must fail when the definitions load, naming the attribute's path and
the value, never halfway through a load. The cases are the mistakes a user makes: a key
or filter column left out of ``columns``, a typo in a type, a sum over text, a name that
clashes, a nullable change stamp.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from pipeline_assets.core.errors import DeclarationError
from pipeline_assets.core.table import ORDERS
from pipeline_assets.core.table.declare import check_apart, declare

PAYMENTS = {
    "table": "shop.payments",
    "primary_key": ["payment_id", "attempt"],
    "cursor": "modified_at",
    "columns": {
        "payment_id": "integer",
        "attempt": "integer",
        "status": "text",
        "amount_cents": "integer",
        "fee": "decimal(10,2)",
        "note": {"type": "text", "nullable": True},
        "refundable": "boolean",
        "settle_on": {"type": "date", "nullable": True},
        "modified_at": "timestamp",
    },
    "daily_files": [
        {
            "name": "captured_payments",
            "where": {"status": "captured"},
            "columns": ["payment_id", "attempt", "amount_cents", "fee", "note", "modified_at"],
            "totals": {"name": "captured_per_day", "sum": ["amount_cents", "fee"]},
        }
    ],
}


def test_a_declaration_gives_every_name_by_one_rule():
    spec = declare(PAYMENTS)
    assert (spec.name, spec.source_name, spec.primary_key) == (
        "payments",
        "payments",
        ("payment_id", "attempt"),
    )
    names = spec.names
    assert (
        names.asset,
        names.match_check,
        names.new_sensor,
        names.load_job,
        names.daily_job,
        names.schedule,
    ) == (
        "payments",
        "payments_match_source",
        "new_payments_sensor",
        "payments_job",
        "payments_daily_job",
        "payments_daily_schedule",
    )
    files = names.files["captured_payments"]
    assert (files.asset, files.totals, files.refresh_sensor, files.job) == (
        "captured_payments",
        "captured_per_day",
        "captured_payments_refresh_sensor",
        "captured_payments_job",
    )
    assert spec.column("note").nullable and not spec.column("fee").nullable


def test_orders_is_a_declaration_that_keeps_its_names():
    names = ORDERS.names
    assert (
        names.asset,
        names.match_check,
        names.new_sensor,
        names.load_job,
        names.daily_job,
        names.schedule,
    ) == (
        "orders",
        "orders_match_source",
        "new_orders_sensor",
        "orders_job",
        "daily_job",
        "daily_schedule",
    )
    paid = names.files["paid_orders"]
    assert (paid.totals, paid.refresh_sensor, paid.job) == (
        "daily_revenue",
        "paid_orders_refresh_sensor",
        "daily_files_job",
    )
    assert ORDERS.column_names == ("order_id", "status", "amount", "updated_at")
    assert ORDERS.daily_files[0].columns == ORDERS.column_names
    assert ORDERS.daily_files[0].matches({"status": "paid"})
    assert not ORDERS.daily_files[0].matches({"status": "pending"})


def test_filter_values_are_read_by_their_columns_type():
    spec = declare(
        PAYMENTS
        | {
            "daily_files": [
                {"name": "refundable_fees", "where": {"refundable": True, "fee": ["1.5", 2]}}
            ]
        }
    )
    assert spec.daily_files[0].where == (
        ("refundable", (True,)),
        ("fee", (Decimal("1.50"), Decimal("2.00"))),
    )


def _with(**changes):
    out = {key: value for key, value in PAYMENTS.items()}
    for key, value in changes.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def _file(**changes):
    return {**PAYMENTS["daily_files"][0], **changes}


@pytest.mark.parametrize(
    ("attributes", "path", "value", "says"),
    [
        (_with(table=None), "table", None, "required"),
        (_with(table="a.b.c"), "table", "a.b.c", "schema-qualified"),
        (_with(name="1payments"), "name", "1payments", "letters, digits"),
        (_with(name="pipeline_batches"), "name", "pipeline_batches", "pipeline's own"),
        (_with(primary_key=["payment_id", "nope"]), "primary_key", "nope", "not a declared"),
        (_with(primary_key="fee"), "primary_key", "fee", "integer, text, date or timestamp"),
        (_with(primary_key="note"), "primary_key", "note", "cannot be nullable"),
        (_with(primary_key=None), "primary_key", None, "required"),
        (_with(cursor="status"), "cursor", "status", "timestamp or a date"),
        (_with(cursor="settle_on"), "cursor", "settle_on", "cannot be nullable"),
        (_with(cursor="attempt"), "day_column", None, "required with cursor: attempt"),
        (
            _with(columns={**PAYMENTS["columns"], "amount_cents": "int"}),
            "columns.amount_cents",
            "int",
            "not a type",
        ),
        (
            _with(columns={**PAYMENTS["columns"], "note": {"type": "text", "nullable": "yes"}}),
            "columns.note.nullable",
            "yes",
            "true or false",
        ),
        (_with(columns={}), "columns", {}, "required"),
        (
            _with(daily_files=[_file(where={"state": "captured"})]),
            "daily_files[0].where.state",
            "state",
            "not a declared column",
        ),
        (
            _with(daily_files=[_file(where={"refundable": "perhaps"})]),
            "daily_files[0].where.refundable",
            "perhaps",
            "not a boolean",
        ),
        (
            _with(daily_files=[_file(columns=["payment_id", "fee"])]),
            "daily_files[0].columns",
            ["payment_id", "fee"],
            "must hold the key",
        ),
        (
            _with(daily_files=[_file(totals={"name": "t", "sum": ["note"]})]),
            "daily_files[0].totals.sum",
            "note",
            "numeric column",
        ),
        (
            _with(daily_files=[_file(totals={"name": "t", "sum": ["status"]})]),
            "daily_files[0].totals.sum",
            "status",
            "numeric column",
        ),
        (
            _with(daily_files=[_file(name="payments")]),
            "daily_files[0].name",
            "payments",
            "is also name",
        ),
        (
            _with(daily_files=[_file(where={"refundable": "yes"})]),  # not one of the contract's
            "daily_files[0].where.refundable",
            "yes",
            "write true or false",
        ),
        (
            _with(daily_files=[_file(where={"refundable": 2})]),
            "daily_files[0].where.refundable",
            2,
            "write true or false",
        ),
        (
            _with(columns={**PAYMENTS["columns"], "__pipeline_day": "integer"}),
            "columns.__pipeline_day",
            "__pipeline_day",
            "the pipeline's own working columns",
        ),
        (
            _with(
                columns={**PAYMENTS["columns"], "rows": "integer"},
                daily_files=[_file(columns=None, totals={"name": "t", "sum": ["rows"]})],
            ),
            "daily_files[0].totals.sum",
            "rows",
            "keep the names day and rows",
        ),
        (
            _with(
                columns={**PAYMENTS["columns"], "fee_exact": "integer"},
                daily_files=[
                    _file(columns=None, totals={"name": "t", "sum": ["fee", "fee_exact"]})
                ],
            ),
            "daily_files[0].totals.sum",
            "fee_exact",
            "names fee's exact sum fee_exact",
        ),
        (_with(primary_key="CHANGE_ME"), "primary_key", "CHANGE_ME", "the column, or the list"),
        (_with(cursor="CHANGE_ME"), "cursor", "CHANGE_ME", "stamps on every change"),
        (_with(table="CHANGE_ME"), "table", "CHANGE_ME", "the source table's name"),
        (
            _with(columns={"CHANGE_ME": "integer"}),
            "columns.CHANGE_ME",
            "CHANGE_ME",
            "placeholder the scaffold left unfilled",
        ),
        (_with(lookback_days=-1), "lookback_days", -1, "0 or more"),
        (_with(max_delete_share=2), "max_delete_share", 2, "between 0 and 1"),
        (_with(colums={}), "colums", {}, "unknown attribute"),
    ],
)
def test_a_bad_declaration_names_the_attribute_and_the_value(attributes, path, value, says):
    with pytest.raises(DeclarationError, match=says) as caught:
        declare(attributes)
    assert (caught.value.path, caught.value.value) == (path, value)
    located = caught.value.located("defs/payments/defs.yaml")
    assert str(located).startswith(f"defs/payments/defs.yaml: {path}: {value!r}: ")


def test_two_declarations_may_not_take_one_name():
    refunds = declare(
        _with(table="refunds", daily_files=[_file(name="captured_payments", totals=None)])
    )
    with pytest.raises(DeclarationError, match="taken by defs/payments") as caught:
        check_apart(
            [("defs/payments/defs.yaml", declare(PAYMENTS)), ("defs/refunds/defs.yaml", refunds)]
        )
    assert caught.value.path == "daily_files[0].name"
    assert str(caught.value).startswith("defs/refunds/defs.yaml: daily_files[0].name")


def test_the_booleans_a_filter_may_write_are_the_contracts():
    """true/false (YAML's or as text), 1/0 and t/f: one value each, read as the column's."""
    for value, read in [(True, True), ("false", False), ("T", True), (0, False), ("1", True)]:
        spec = declare(_with(daily_files=[_file(where={"refundable": value})]))
        assert spec.daily_files[0].where == (("refundable", (read,)),)


def test_a_declared_column_may_take_any_name_but_the_pipelines_own_prefix():
    """The machinery's working names, SQL's reserved words, mixed case and other scripts
    are all column names a source can have."""
    names = ["day", "instant", "paid", "file", "_row", "key", "column", "rows", "old__key"]
    names += ["order", "select", "Group", "Größe", "名前", "count_all", "s_day", "bad"]
    columns = {name: "integer" for name in names} | {"at": "timestamp"}
    spec = declare({"table": "t", "primary_key": "key", "cursor": "at", "columns": columns})
    assert spec.column_names == (*names, "at")
    with pytest.raises(DeclarationError, match="CHANGE_ME") as caught:
        declare({"table": "t", "primary_key": "key", "cursor": "CHANGE_ME", "columns": columns})
    assert "dg scaffold defs pipeline_assets.IncrementalTable" in str(caught.value)
