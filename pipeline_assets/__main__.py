"""``python -m pipeline_assets``: the same command line as ``pipeline-assets``."""

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
