"""pipeline_assets: incremental, idempotent loads and atomic daily files, as Dagster assets."""

__version__ = "0.1.0"
