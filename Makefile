# Task Executor: every entry point sets itself up (venv, packages, embedded PostgreSQL).
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
REQS := requirements.txt requirements-dev.txt $(wildcard requirements-infra.txt)
STAMP := $(VENV)/.installed

.PHONY: run test lint typecheck unit migrate clean venv

$(STAMP): $(REQS)
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11+ is required")'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --disable-pip-version-check -q 'pip>=23,<26.3'  # chalice 1.34 needs pip<26.3
	$(PY) -m pip install --disable-pip-version-check -q -r requirements-dev.txt \
		$(if $(wildcard requirements-infra.txt),-r requirements-infra.txt)
	@touch $@

venv: $(STAMP)

## run: the whole local stack (API + worker + scheduler) on an embedded PostgreSQL.
run: $(STAMP)
	$(PY) -m chalicelib.local

## test: lint, type check, then the whole test suite (unit + integration).
test: $(STAMP) lint typecheck
	$(PY) -m pytest -m "not chaos"

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

typecheck: $(STAMP)
	$(PY) -m mypy

unit: $(STAMP)
	$(PY) -m pytest tests/unit

## migrate: apply migrations to TE_DATABASE_URL (or the embedded database).
migrate: $(STAMP)
	TE_LOCAL_MODE=$${TE_LOCAL_MODE:-true} $(PY) -m chalicelib.db.migrate

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

# Benchmarks (make bench, make bench-quick) live with their scripts.
-include bench/bench.mk
# Fault injection (make chaos): long runs that break things on purpose.
-include chaos.mk
