# Two commands on a fresh clone: `make dev` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PORT   ?= 3000
# Run history, sensor cursors and schedules survive a restart: Dagster's home lives in
# the checkout (git-ignored), not in a temporary folder. DAGSTER_HOME=… and
# PIPELINE_DATA_DIR=… in the environment put both elsewhere (the browser test does).
DAGSTER_HOME ?= $(CURDIR)/.dagster_home
export DAGSTER_HOME

.PHONY: install dev test check lint format bench screenshots clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

install: $(BIN)/.installed

# The instance: run monitoring and run retries on (deploy/dagster-dev.yaml says why);
# copied again whenever that file changes.
$(DAGSTER_HOME)/dagster.yaml: deploy/dagster-dev.yaml
	mkdir -p $(DAGSTER_HOME)
	cp deploy/dagster-dev.yaml $@

dev: install $(DAGSTER_HOME)/dagster.yaml
	$(BIN)/pipeline-assets demo init --if-missing
	$(BIN)/dagster dev -h 127.0.0.1 -p $(PORT)

# Four workers (TEST_WORKERS=…) on two cores: much of the suite's time is spent waiting
# on the real dagster CLI and dagster dev in subprocesses. The tests that start a whole
# stack (dagster dev, a deployment, the soak) form two groups (xdist_group "stack-1" and
# "stack-2"), each run one test at a time on a worker of its own and handed out first:
# never more than two stacks at once, and the two other workers run everything else
# beside them (the `long` tests first, conftest.py). pyproject.toml pins the pytest that
# keeps those groups, and a grouped test fails if they are lost. On two cores the suite
# took 14m32s to 17m52s over four runs: the cores are the limit (its processes need
# about 1,300 CPU seconds, and the host's steal time varies), not the workers (six took
# 17m40s).
TEST_WORKERS ?= 4
test: install
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup --durations=25

# The fast loop while changing the code: lint, then every test that needs no server, no
# subprocess and no browser (a minute and a half on 2 cores, three workers). `make test` is
# the whole suite.
check: lint
	$(BIN)/python -m pytest -q -n 3 -m "not postgres and not mysql and not e2e and not browser and not s3 and not celery"

# `ruff format` writes the layout (`make format`); the check refuses code not in it.
# `lint-imports` checks the layers (pyproject.toml's import-linter contracts).
lint: install
	$(BIN)/ruff check pipeline_assets pipeline_assets_tests benchmarks
	$(BIN)/ruff format --check pipeline_assets pipeline_assets_tests benchmarks
	$(BIN)/lint-imports

format: install
	$(BIN)/ruff format pipeline_assets pipeline_assets_tests benchmarks
	$(BIN)/ruff check --fix pipeline_assets pipeline_assets_tests benchmarks

# Every benchmark at full size (about half an hour on 2 cores), PostgreSQL too when
# BENCH_POSTGRES is reachable, and the peer benchmarks with the `bench` extra (dlt, Sling).
BENCH_POSTGRES ?= postgresql+psycopg://postgres@127.0.0.1:5432/test
bench: install
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	$(BIN)/python benchmarks/bench_load.py --postgres-if-reachable '$(BENCH_POSTGRES)'
	$(BIN)/python benchmarks/bench_run_cost.py
	$(BIN)/python benchmarks/bench_run_cost.py --orders 1000000 --postgres-if-reachable '$(BENCH_POSTGRES)'
	$(BIN)/python benchmarks/bench_peer.py
	$(BIN)/python benchmarks/bench_peer.py --postgres-if-reachable '$(BENCH_POSTGRES)'
	$(BIN)/python benchmarks/bench_backfill.py
	$(BIN)/python benchmarks/bench_celery.py
	$(BIN)/python benchmarks/bench_sensor_tick.py
	$(BIN)/python benchmarks/bench_verify.py
	$(BIN)/python benchmarks/bench_committed_lookup.py
	$(BIN)/python benchmarks/bench_deletes.py
	$(BIN)/python benchmarks/bench_deletes.py --postgres-if-reachable '$(BENCH_POSTGRES)'
	$(BIN)/python benchmarks/bench_tables.py
	$(BIN)/python benchmarks/bench_tables.py --postgres-if-reachable '$(BENCH_POSTGRES)'
	$(BIN)/python benchmarks/bench_payments_peers.py
	$(BIN)/python benchmarks/bench_payments_peers.py --postgres-if-reachable '$(BENCH_POSTGRES)'
	$(BIN)/python benchmarks/bench_schema.py
	$(BIN)/python benchmarks/bench_schema.py --postgres-if-reachable '$(BENCH_POSTGRES)'
	$(BIN)/python benchmarks/bench_history.py
	$(BIN)/python benchmarks/bench_whole_table.py
	$(BIN)/python benchmarks/bench_lookback_ids.py
	$(BIN)/python benchmarks/bench_parquet.py

# Refresh docs/images from the browser test (a real make dev in headless Chromium).
screenshots: install
	PIPELINE_SCREENSHOTS_DIR=$(CURDIR)/docs/images $(BIN)/python -m pytest -q -s \
		pipeline_assets_tests/test_browser.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
