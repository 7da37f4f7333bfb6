# The README's two commands: `make demo` and `make test`. Everything installs from here.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: env demo test lint bench fuzz tpcds clean

$(STAMP): pyproject.toml scripts/install-system-deps.sh
	bash scripts/install-system-deps.sh
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

# The Spark jars (lakehouse/spark/pom.xml), resolved with Maven once into the user's cache.
env: $(STAMP)
	$(BIN)/lakehouse jars

demo: env
	$(BIN)/lakehouse demo --dir demo

test: env
	$(BIN)/python -m pytest -q --durations=15 tests

lint: env
	$(BIN)/ruff check lakehouse ivm sinks catalog_api tests
	$(BIN)/mypy

# Benchmarks (issue #6): TPC-H refreshes, catalog load, freshness, soak (#19) -> docs/benchmarks.md.
# Options: make bench BENCH_ARGS='--parts tpch --scale-factors 0.1,1'
bench: env
	bash tests/benchmarks/install-system-deps.sh
	$(BIN)/python -m tests.benchmarks $(BENCH_ARGS)

# The random-query fuzzer (issue 20): make fuzz N=10000 [SEED=0]; minimized failures are
# written to tests/fuzz/regressions/, which `make test` replays.
N ?= 1000
SEED ?= 0
fuzz: env
	$(BIN)/python -m tests.fuzz --views $(N) --seed $(SEED)

# Every TPC-DS query's ticks against a full recompute (issue 20; `make test` checks a subset).
tpcds: env
	LAKEHOUSE_TPCDS_QUERIES=all $(BIN)/python -m pytest -q --durations=0 tests/integration/test_tpcds_ivm.py

clean:
	rm -rf $(VENV) demo
