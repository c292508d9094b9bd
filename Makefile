# Two commands do everything on a fresh machine with Python 3.11 and make:
#   make demo   set up, start the bundled simulator, sync, change, sync again, build dbt, summarise
#   make test   set up, lint, run the test suite (and print its 25 slowest tests)
#   make test-fast  the unit tests only, under a minute (the inner loop)
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DATA_DIR ?= $(CURDIR)/data
export DAGSTER_HOME ?= $(CURDIR)/.dagster_home

.PHONY: setup setup-lake test test-fast lint demo ui dashboard bench clean

# .venv/bin/python, .venv-lake/bin/python: a virtual environment of $(PYTHON)
%/bin/python:
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "error: $(PYTHON) not found (Python 3.11 is required; set PYTHON=...)"; exit 1; }
	$(PYTHON) -m venv $*

# Installs go through uv (pinned in constraints.txt, bootstrapped with the venv's pip): the same pins,
# resolved and installed in about 20 s where pip took minutes. Its cache stays in the repository.
# --compile-bytecode: pip writes .pyc files at install, uv does not, and where PYTHONDONTWRITEBYTECODE is
# set (it is on these machines) every process then compiles each module it imports: an incremental run
# took 21.4 s of CPU without them, 14.6 s with them, and every subprocess of the tests paid the same.
export UV_CACHE_DIR ?= $(CURDIR)/.uv-cache
UV_INSTALL = $(1)/python -m pip install --quiet -c constraints.txt uv && \
	$(1)/uv pip install --quiet --compile-bytecode --python $(1)/python -c $(2) -e "$(3)"

$(STAMP): $(BIN)/python pyproject.toml constraints.txt
	$(call UV_INSTALL,$(BIN),constraints.txt,.[dev])
	@touch $(STAMP)

# The project's own modules compiled too (an install compiles the packages it installs, not the editable
# project): where PYTHONDONTWRITEBYTECODE is set, every process would compile each project module it imports
# (0.7 s of CPU for the job's), and the tests start dozens. compileall writes only what changed.
COMPILE = $(1)/python -m compileall -q -j 0 freight_pipeline freight_pipeline_tests scripts bench

setup: $(STAMP)
	@$(call COMPILE,$(BIN))

# Lake mode's environment: duckdb 1.5.5 with DuckLake's extension packages (which exist for 1.5.5
# only), so the default environment keeps duckdb 2.0, faster for the embedded warehouse
# (docs/performance.md). Its constraints: constraints.txt with constraints-lake.txt's duckdb lines.
LAKE_VENV := .venv-lake
LAKE_BIN := $(LAKE_VENV)/bin
LAKE_STAMP := $(LAKE_VENV)/.installed
LAKE_EXTRAS := .[dev,lake]

$(LAKE_STAMP): $(LAKE_BIN)/python pyproject.toml constraints.txt constraints-lake.txt
	grep -v '^duckdb==' constraints.txt | cat - constraints-lake.txt > $(LAKE_VENV)/constraints.txt
	$(call UV_INSTALL,$(LAKE_BIN),$(LAKE_VENV)/constraints.txt,$(LAKE_EXTRAS))
	@touch $(LAKE_STAMP)

setup-lake: $(LAKE_STAMP)
	@$(call COMPILE,$(LAKE_BIN))

lint: setup
	$(BIN)/ruff check .

# Test files run in parallel worker processes (one file stays in one worker: module fixtures are
# shared); most tests wait on HTTP and subprocesses, so even 2 cores gain from it.
TEST_WORKERS ?= auto
# The default environment's suite, the longer of the two and the one whose tests wait most (latency, backoff,
# servers, dbt workers): twice as many workers as cores (at most 4). On 2 cores, beside the lake's 2, its clean-clone
# CI took 10 min 47 s with 4 workers, 11 min 44 s with 3 and 12 min 48 s with 2 (bench/log.md, 2026-12-04 night).
MAIN_TEST_WORKERS ?= $(if $(filter auto,$(TEST_WORKERS)),$(shell echo $$((2 * $$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)))),$(TEST_WORKERS))

# pytest in environment $(1): bytecode written even where PYTHONDONTWRITEBYTECODE is set, so that pytest keeps
# the test modules it rewrites for its assertion messages (several seconds of each worker's collection, every run;
# `make test-fast` 28.9 s -> 24.3 s of CPU); the project's and packages' own are compiled at setup already.
PYTEST = PYTHONDONTWRITEBYTECODE= $(1)/python -m pytest -q -n $(or $(2),$(TEST_WORKERS)) --maxprocesses 4 --dist loadfile

# The main suite's test modules and pytest's plugins (hypothesis, anyio, xdist, ...) collected once, by one process,
# before its workers start: pytest rewrites each module's asserts and keeps the result beside its bytecode, and on a
# clean clone each of the four workers rewrote the same 260 modules at once (a cold collection 11 s of CPU, a warm
# one 6.5 s: 45 s against 37 s; its tests began 60 s into the CI instead of 64 s). Not the lake's: two workers
# collecting 5 s each gain nothing from a third, nor does a suite in one process (`TEST_WORKERS=0`). A failure here is
# the run's own to report: its collection is the same.
PYTEST_WARM = PYTHONDONTWRITEBYTECODE= $(1)/python -m pytest -q -n 0 --collect-only -p no:cacheprovider $(2) >/dev/null 2>&1 || true

# The lake tests (freight_pipeline_tests/lake) run in the lake environment, the others in the default one;
# both at once (their tests mostly wait on servers and subprocesses), the lake's output shown after the other's.
# The lake environment is set up beside the main tests too, not before them (half a minute sooner).
test: setup lint
	@lake_log=$$(mktemp); \
	{ $(MAKE) --no-print-directory setup-lake && \
	  $(call PYTEST,$(LAKE_BIN)) --durations=25 \
		freight_pipeline_tests/lake; } \
		> $$lake_log 2>&1 & lake=$$!; \
	$(if $(filter-out 0 1,$(MAIN_TEST_WORKERS)),{ $(call PYTEST_WARM,$(BIN),--ignore=freight_pipeline_tests/lake); }; )\
	$(call PYTEST,$(BIN),$(MAIN_TEST_WORKERS)) --durations=25 \
		--ignore=freight_pipeline_tests/lake; \
	main=$$?; wait $$lake; lake_rc=$$?; \
	echo "--- lake environment: freight_pipeline_tests/lake"; cat $$lake_log; rm -f $$lake_log; \
	[ $$main -eq 0 ] && [ $$lake_rc -eq 0 ]

# The inner loop: the unit tests only (not marked slow: no whole job, sync, dbt, Dagster or child
# process; freight_pipeline_tests/conftest.py), in the default environment, under a minute.
test-fast: setup
	$(call PYTEST,$(BIN)) --fast \
		--ignore=freight_pipeline_tests/lake

# LAKE=1 (or local): into a DuckLake with a SQLite catalog and Parquet under $(DATA_DIR)/work/lake;
# LAKE=s3: its Parquet on a local S3 server (moto) that lives as long as the demo (docs/lake.md)
LAKE ?=
LAKE_MODE := $(if $(filter 1,$(LAKE)),local,$(LAKE))

demo: $(if $(LAKE_MODE),setup-lake,setup)
	@mkdir -p "$(DAGSTER_HOME)"
	$(if $(LAKE_MODE),$(LAKE_BIN),$(BIN))/freight-pipeline demo --data-dir "$(DATA_DIR)" $(if $(LAKE_MODE),--lake $(LAKE_MODE))

ui: setup
	@mkdir -p "$(DAGSTER_HOME)"
	$(BIN)/freight-pipeline ui --data-dir "$(DATA_DIR)"

# The BI dashboard (Streamlit) over the published $(DATA_DIR)/warehouse.duckdb, read-only:
# http://127.0.0.1:$(DASHBOARD_PORT)
DASHBOARD_PORT ?= 8501

dashboard: setup
	$(BIN)/freight-pipeline dashboard --data-dir "$(DATA_DIR)" --port $(DASHBOARD_PORT)

# The dlt peer runs in a venv of its own (its dependencies are not the project's), pinned by
# bench/peer-constraints.txt; .bench/ is ignored by git.
PEER_VENV := .bench/peer-venv
PEER_STAMP := $(PEER_VENV)/.installed

$(PEER_STAMP): bench/peer-constraints.txt
	$(PYTHON) -m venv $(PEER_VENV)
	$(PEER_VENV)/bin/python -m pip install --quiet -c bench/peer-constraints.txt "dlt[duckdb]" httpx
	@touch $(PEER_STAMP)

bench: setup $(PEER_STAMP)
	$(BIN)/python bench/compare.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) $(LAKE_VENV) data .dagster_home .pytest_cache .ruff_cache dbt_models/target dbt_models/logs .uv-cache
