"""The plain-Python core of pipeline_assets: every rule of the pipeline, no Dagster.

Its packages, from the bottom up; each imports only those below it (pyproject.toml's
import-linter contracts hold it, docs/design.md draws it):

- :mod:`.errors`, :mod:`.failures`, :mod:`.secrets`, :mod:`.crash`: the error types (one
  module), what a driver's error code means, passwords kept out of messages, the named
  crash points the kill tests use.
- :mod:`.times`, :mod:`.days`: instants, zones, calendar days and runs of days.
- :mod:`.table`: a declared table: its spec, the declaration's rules, its column types,
  the pipeline's own working column names, ``orders``' declaration.
- :mod:`.commands`: every command the pipeline prints for a user to run.
- :mod:`.db` and :mod:`.rows` (apart): engines, names as SQL, the warehouse's tables; and
  rows as Arrow batches, normalized, checked, keyed and digested.
- :mod:`.source` and :mod:`.warehouse` (apart): reading the app's table; staging,
  merging, the watermark, the declarations recorded and followed.
- :mod:`.load` and :mod:`.daily_files` (apart): one batch from source to warehouse; the
  day files, their manifests and the views they are built from.
- :mod:`.verify` and :mod:`.sensing` (apart): reconciliation and the match-source check;
  what the sensors see and decide.
- :mod:`.scaffold`, :mod:`.broker`: the draft of a declaration, the Celery broker's
  settings. (The demo app that writes ``orders`` is not the pipeline:
  :mod:`pipeline_assets.demo`, beside this package.)

Nothing here reads the environment or the clock: the callers (the Dagster layer, the
command line) pass settings, engines and times in.
"""
