# The two commands of the README: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# `make run` needs only the gateway and the CLI (~100 MB, ~20 s); `make test`
# adds the test toolchain, the vendor SDKs and the protocol peers (the full STAMP).
RUN_STAMP := $(VENV)/.installed-run
PIP    := $(BIN)/python -m pip install -q --disable-pip-version-check

.PHONY: run test lint typecheck unit bench fuzz flaky clean

# (Re)install whenever the project's metadata changes.
$(RUN_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) -e '.[server,cli]'
	touch $(RUN_STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) --upgrade pip
	$(PIP) -e '.[dev,peers]'
	touch $(STAMP) $(RUN_STAMP)

# `make run PORT=9000 HOST=0.0.0.0` serves elsewhere; PORT=0 takes any free port.
HOST ?= 127.0.0.1
PORT ?= 8080
run: $(RUN_STAMP)
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

# The process-level folders N times each (`make flaky N=3`), each run a fresh pytest
# process; prints every test that failed even once. Not in `make test` (about an hour at N=10).
N ?= 10
FLAKY_DIRS ?= tests/hostile tests/server tests/production
flaky: $(STAMP)
	$(BIN)/python tests/repeat.py --times $(N) $(FLAKY_DIRS)

# atheris harnesses for the SSE decoder, the request parser and convert's format detection,
# 60 s each (not in `make test`).
fuzz: $(STAMP)
	$(BIN)/python -m pip install -q atheris
	$(BIN)/python fuzz/run.py --seconds 60

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis .coverage .coverage.json
