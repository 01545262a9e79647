"""pipeline_assets: incremental, idempotent loads and atomic daily files, as Dagster assets.

``pipeline_assets.IncrementalTable`` is the component a ``defs.yaml`` declares a table
with. It is imported on first use, so the command line and ``pipeline_assets.core`` do not
load Dagster.
"""

__version__ = "0.1.0"
__all__ = ["IncrementalTable"]


def __getattr__(name: str):
    if name == "IncrementalTable":
        from .component import IncrementalTable

        return IncrementalTable
    raise AttributeError(f"module 'pipeline_assets' has no attribute {name!r}")


def __dir__() -> list[str]:  # dg lists a registry module's components through dir()
    return sorted([*globals(), "IncrementalTable"])
