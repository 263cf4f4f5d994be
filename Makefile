# The two commands of the README: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# `make run` needs only the gateway and the CLI (~60 MB, ~20 s, measured by
# tests/install/test_make_run.py); `make test`
# adds the test toolchain, the vendor SDKs and the protocol peers (the full STAMP).
RUN_STAMP := $(VENV)/.installed-run
PIP    := $(BIN)/python -m pip install -q --disable-pip-version-check

.PHONY: run test lint typecheck unit bench fuzz flaky clean

# A new venv's own ensurepip takes ~14 s of a first `make run` on a loaded 2-core
# machine; when this Python's pip can install into another interpreter (--python,
# pip >= 22.3), the venv is made without it and that pip installs pip with the rest.
# --no-compile: compiling every installed module up front took ~10 s more; Python
# compiles the modules `serve` imports when it first imports them.
# (Re)install whenever the project's metadata changes.
$(RUN_STAMP): pyproject.toml
	if test -x $(BIN)/python; then :; \
	elif $(PYTHON) -m pip install --help 2>/dev/null | grep -q -e '--python'; then \
		$(PYTHON) -m venv --without-pip $(VENV); \
	else $(PYTHON) -m venv $(VENV); fi
	if $(BIN)/python -m pip --version >/dev/null 2>&1; then \
		$(PIP) --no-compile -e '.[server,cli]'; \
	else $(PYTHON) -m pip --python $(BIN)/python install -q --disable-pip-version-check \
		--no-compile pip -e '.[server,cli]'; fi
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
