# Two commands do all the set-up on a fresh machine with Python 3.11 and make:
#   make demo   run the flagship example DAG end to end against the bundled simulator (+ local S3)
#   make test   lint, type-check and run the whole test suite
SHELL := /bin/bash
.DEFAULT_GOAL := help
PYTHON ?= python3
UV_VERSION := 0.13.9
TOOLS := .tools
UV := $(TOOLS)/bin/uv
VENV := .venv
BIN := $(VENV)/bin
export UV_LINK_MODE := copy
# Install every package with its bytecode. Without .pyc files a shell with PYTHONDONTWRITEBYTECODE=1 (CI's has it)
# compiles Airflow from source in every process: `import airflow.sdk` took 6.4 s instead of 2.4 s, in every test
# worker, every `airflow` command and every subprocess that imports the provider.
export UV_COMPILE_BYTECODE := 1
# pytest-xdist workers: four per CPU (at least 12), scheduled by work stealing. The integration tests mostly wait on
# the simulator's clock and on subprocesses, the rest is CPU: 3,041 tests took 16.8 CPU-minutes (2026-12-03). On an
# idle 2-CPU machine 12 workers ran them in 8 min 56 s, 8 in 9 min 52 s (each worker pays ~10 CPU-s to start:
# Airflow's imports and its in-process execution API). Every test must pass on a loaded machine anyway.
TEST_WORKERS ?= $(shell $(PYTHON) -c 'import os; print(max(12, 4 * len(os.sched_getaffinity(0))))')

.PHONY: help sync lint format typecheck test demo bench clean mutation

help:
	@echo "make test   - install the locked environment, run ruff, import-linter, mypy and pytest"
	@echo "make test COVERAGE=1 - the same with the coverage of product code (fails below 90 %; CI runs this)"
	@echo "make demo   - run the flagship DAG end to end against the bundled Brev simulator"
	@echo "make bench  - run the benchmarks, write benchmarks/results.json"
	@echo "make mutation - mutation testing of the pure core (core/), report in mutation/report.md"
	@echo "make airflow - a local Airflow UI with the provider, its examples, the simulator and local S3"
	@echo "make docs   - build the documentation site into .site/ (warnings are errors); open .site/index.html"
	@echo "make chromium - install Debian's chromium (root, apt-get) when missing: the docs site's browser test"
	@echo "make system-test - the system tests against REAL Brev (billed; needs BREV_API_TOKEN)"

# The first `make demo` / `make test` of a clone installs everything before it starts: the two lines below say what
# and about how long (measured on a 2-CPU machine: ~1 min with uv's download cache warm, ~2 min from the network).
$(UV):
	@echo "Installing uv $(UV_VERSION) into $(TOOLS)/ (once per clone, a few seconds) ..."
	$(PYTHON) -m venv $(TOOLS)
	$(TOOLS)/bin/python -m pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)

$(BIN)/python: $(UV) uv.lock pyproject.toml
	@echo "Installing the locked environment into $(VENV)/ from uv.lock: Apache Airflow, the Amazon provider, moto,"
	@echo "the test and lint tools ($$(grep -c '^\[\[package\]\]' uv.lock) packages, about 1 GB; 1-2 minutes, again only when uv.lock changes) ..."
	$(UV) sync --locked --quiet
	@touch $(BIN)/python

sync: $(BIN)/python

lint: sync
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/shellcheck airflow_provider_brev/remote/*.sh scripts/*.sh

format: sync
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

typecheck: sync
	$(BIN)/mypy

# `make test COVERAGE=1` (what .ci/run runs): the same suite with the coverage of product code and its tripwire
# (fail_under in pyproject.toml). Off by default: on Python 3.11 coverage.py sees every function call of Airflow
# too (sys.settrace), and the suite took 1,439 CPU-seconds with it against 1,006 without (2026-12-03, 2 CPUs).
COVERAGE ?=
# The suite writes the bytecode of its own files (tests/ and the editable package; __pycache__/ is git-ignored) even
# where PYTHONDONTWRITEBYTECODE=1 is set (CI's shell): otherwise every xdist worker rewrites the asserts of every
# test module and compiles the package again, about 5 CPU-s per process. One collection (`test-collect`, run beside
# mypy) writes it before the workers start. Measured: collecting took 10.2 CPU-s without the cache, 5.8 with it.
SUITE_ENV := PYTHONDONTWRITEBYTECODE=
test: sync
	@$(MAKE) --no-print-directory --output-sync=target -j4 lint typecheck docs chromium test-collect
	$(SUITE_ENV) $(BIN)/pytest -n $(TEST_WORKERS) --dist worksteal $(if $(COVERAGE),--cov --cov-report=term) --durations=15

.PHONY: test-collect
# Collect the suite once (no test runs): fails early on an import error and leaves the bytecode cache for the workers.
# $(call collect_suite,<pytest>): quiet unless collection fails (then its last 40 lines).
collect_suite = @out=$$($(SUITE_ENV) $(1) --collect-only -qq 2>&1) || { echo "$$out" | tail -40; exit 1; }
test-collect: sync
	$(call collect_suite,$(BIN)/pytest)

demo: sync
	$(BIN)/python scripts/demo.py

bench: sync
	$(BIN)/python benchmarks/run.py

# Every mutant of every module of the pure core (airflow_provider_brev/core/) against the unit tests that execute it;
# writes mutation/report.md and mutation/report.json, fails below the thresholds of mutation/README.md.
mutation: sync
	$(BIN)/python -m mutation --check

clean:
	rm -rf $(VENV) $(TOOLS) .mypy_cache .ruff_cache .pytest_cache

.PHONY: deployment-test
# The provider wheel in a real distributed Airflow 3.3 (PostgreSQL, CeleryExecutor on Redis, scheduler, dag-processor,
# triggerer, api-server, two workers) against the Brev simulator and moto S3; see deployment/README.md.
deployment-test: $(UV)
	$(PYTHON) deployment/deployment_test.py --uv $(UV)

.PHONY: test-floor
# The test suite against the OLDEST Airflow pyproject.toml declares (3.0.x) in its own venv, pinned (with hashes) by
# floor/requirements.txt; the project itself is installed non-editable on top. See floor/README.md.
FLOOR_VENV := .floor-venv
test-floor: $(UV)
	$(UV) venv --quiet --allow-existing --python $(PYTHON) $(FLOOR_VENV)
	$(UV) pip sync --quiet --python $(FLOOR_VENV)/bin/python --require-hashes floor/requirements.txt
	$(UV) pip install --quiet --python $(FLOOR_VENV)/bin/python --no-deps --reinstall .
	$(call collect_suite,$(FLOOR_VENV)/bin/pytest -p no:cacheprovider)
	$(SUITE_ENV) $(FLOOR_VENV)/bin/pytest -p no:cacheprovider -n $(TEST_WORKERS) --dist worksteal $(PYTEST_ARGS)

.PHONY: docs
# The documentation site (MkDocs Material + mkdocstrings), warnings as errors; output in .site/ (git-ignored).
docs: sync
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir .site

.PHONY: chromium
# Debian's Chromium for the browser tests (the docs site read over file://: tests/unit/project/test_docs_site.py): nothing
# when /usr/bin/chromium exists, else `apt-get update` + `apt-get install chromium` as root, else how to install it.
# Not fatal here: without it `make test` still runs the suite, and the browser test fails saying how to install it.
chromium:
	@bash scripts/install_chromium.sh || echo "make chromium: no browser, the docs site test will fail"

.PHONY: airflow
# A real local Airflow (api-server, scheduler, dag-processor, triggerer; SQLite, LocalExecutor) on
# 127.0.0.1:${PORT:-8080} with the provider, its examples, the simulator and local S3; state under .airflow-local/.
airflow: sync
	$(BIN)/python scripts/airflow_local.py

.PHONY: airflow-smoke
# CI: start `make airflow`, trigger the examples through the REST API and the UI (no logical date), the flagship
# twice (the second run warm), check the Brev page in Chromium (Playwright), stop everything.
airflow-smoke: sync
	$(BIN)/python deployment/airflow_smoke.py

.PHONY: system-test
# tests/system against REAL Brev (prints the estimated cost first, always deletes); `make test` runs the same tests
# against the simulator. Needs BREV_API_TOKEN or AIRFLOW_CONN_BREV_DEFAULT (else skipped); optional BREV_SYSTEM_GPU
# (e.g. L4) and BREV_SYSTEM_MAX_PRICE (USD/h, default 1.50) narrow the cheapest 1-GPU type chosen.
# Every `brev` call is recorded, secrets scrubbed, in tests/system/transcripts/real-<UTC time>.jsonl (or the file named by
# AIRFLOW_PROVIDER_BREV_TRANSCRIPT), a transcript `make test` replays on the simulator: docs/transcripts.md.
system-test: sync
	BREV_SYSTEM_TEST=real \
	AIRFLOW_PROVIDER_BREV_TRANSCRIPT="$${AIRFLOW_PROVIDER_BREV_TRANSCRIPT:-$(CURDIR)/tests/system/transcripts/real-$$(date -u +%Y%m%dT%H%M%SZ).jsonl}" \
	$(BIN)/pytest tests/system -v
