"""Reading the app's table, which the pipeline only ever reads.

- :mod:`.sql`: the source's SQL per dialect: the window, the scan, the keys.
- :mod:`.scan`: the one reader: the table reflected, its rows as validated Arrow batches,
  one per key, in key order; every key the source holds.
"""
