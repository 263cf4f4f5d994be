# The two commands of the README: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test lint typecheck unit bench fuzz clean

# (Re)install whenever the project's metadata changes.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev,peers]'
	touch $(STAMP)

# `make run PORT=9000 HOST=0.0.0.0` serves elsewhere; PORT=0 takes any free port.
HOST ?= 127.0.0.1
PORT ?= 8080
run: $(STAMP)
	$(BIN)/tokenwire serve --host $(HOST) --port $(PORT)

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

typecheck: $(STAMP)
	$(BIN)/mypy

# The coverage gate: core + translators traced in process (pyproject.toml's
# [tool.coverage.run]); the per-module table prints, then the floors are checked.
unit: $(STAMP)
	$(BIN)/pytest -q --durations=15 -p tests.coverage_gate --cov --cov-report=term \
		--cov-report=json:.coverage.json
	$(BIN)/python tests/coverage_gate.py .coverage.json

test: lint typecheck unit

bench: $(STAMP)
	$(BIN)/python bench/decode.py
	$(BIN)/python bench/translate.py
	$(BIN)/python bench/gateway.py
	$(BIN)/python bench/client.py

# atheris harnesses for the SSE decoder and the request parser, 60 s each (not in `make test`).
fuzz: $(STAMP)
	$(BIN)/python -m pip install -q atheris
	$(BIN)/python fuzz/run.py --seconds 60

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis .coverage .coverage.json
