# One command sets up and runs the demo; one sets up and runs the tests.
#   make demo    create .venv (if needed) and run the offline demo (bayespass run; report in runs/demo)
#   make test-all  create .venv (if needed) and run every test: fast, slow statistical ones and the
#                  notebooks (the README's test command; what .ci/run calls)
#   make test      the fast subset for development (deselects the slow statistical tests, no notebooks)
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.installed-stamp
export OPENBLAS_NUM_THREADS ?= 1
export OMP_NUM_THREADS ?= 1
export MKL_NUM_THREADS ?= 1

.PHONY: demo demo-quick test test-all lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev,hf]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/bayespass run --out runs/demo

demo-quick: $(STAMP)
	$(BIN)/bayespass run --quick --out runs/quick

test: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow" tests

test-all: $(STAMP)
	$(BIN)/python -m pytest -q tests notebooks --nbmake --nbmake-timeout=900

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_estimators.py

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info .pytest_cache
