# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint bench bench-quick protos clean

$(STAMP): setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/yarn-arbiter demo
	$(BIN)/python -m hive_hooks.demo

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/pytest -q

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

protos: $(STAMP)
	$(BIN)/python -m protos.generate

bench: $(STAMP)
	$(BIN)/python benchmarks/auction_latency.py

bench-quick: $(STAMP)
	$(BIN)/python benchmarks/auction_latency.py --quick

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
