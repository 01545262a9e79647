"""dlt's side of the payments benchmarks: one run of ``sql_table(...)`` into a destination.

``bench_tables.py`` calls :func:`run_pipeline` in its own process (its first load into
duckdb); ``bench_payments_peers.py`` runs this file as a fresh process per run, so that
starting Python and importing dlt count in dlt's seconds as the imports of a whole
``dagster asset materialize`` count in ours:

    python benchmarks/dlt_child.py '{"credentials": "sqlite:///…", "folder": "…",
        "name": "…", "destination": "duckdb" | "sqlalchemy" | "postgres",
        "destination_credentials": "…", "backend": "connectorx"}'

It prints one JSON line: the seconds of ``pipeline.run`` and the rows dlt normalized.
Only the standard library and dlt are imported here (nothing of ``pipeline_assets``).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

DATASET = "peer"


def destination_for(kind: str, credentials: str):
    """dlt's destination ``kind``: duckdb (a file path), sqlalchemy or postgres (a URL)."""
    import dlt

    if kind == "duckdb":
        return dlt.destinations.duckdb(credentials)
    if kind == "sqlalchemy":
        return dlt.destinations.sqlalchemy(credentials)
    if kind == "postgres":
        return dlt.destinations.postgres(credentials)
    raise ValueError(f"unknown destination {kind!r}")


def run_pipeline(
    credentials: str,
    *,
    folder: Path,
    name: str,
    destination: str = "duckdb",
    destination_credentials: str | None = None,
    backend: str = "connectorx",
) -> tuple[float, int]:
    """One run of the ``payments`` pipeline ``name`` (its state under ``folder``: a second
    call with the same name is an incremental run): seconds of ``pipeline.run``, rows."""
    import dlt
    from dlt.sources.sql_database import sql_table

    pipeline = dlt.pipeline(
        pipeline_name=name,
        pipelines_dir=str(Path(folder) / "pipelines"),
        destination=destination_for(
            destination, destination_credentials or str(Path(folder) / f"{name}.duckdb")
        ),
        dataset_name=DATASET,
    )
    table = sql_table(
        credentials=credentials,
        table="payments",
        backend=backend,
        primary_key=["payment_id", "attempt"],
        incremental=dlt.sources.incremental("modified_at"),
        write_disposition="merge",
    )
    started = time.perf_counter()
    info = pipeline.run(table)
    seconds = time.perf_counter() - started
    info.raise_on_failed_jobs()
    trace = pipeline.last_trace
    counts = trace.last_normalize_info.row_counts if trace and trace.last_normalize_info else {}
    return seconds, int(counts.get("payments", 0))


if __name__ == "__main__":
    options = json.loads(sys.argv[1])
    seconds, rows = run_pipeline(options.pop("credentials"), **options)
    print(json.dumps({"seconds": seconds, "rows": rows}))
