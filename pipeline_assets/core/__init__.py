"""Plain-Python core of pipeline_assets: no Dagster here, so every rule tests on its own."""
