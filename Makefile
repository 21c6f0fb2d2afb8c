# Task Executor: every entry point sets itself up (venv, packages, embedded PostgreSQL).
# `make run` installs only what running needs (requirements-run.txt); `make test` adds the
# development and CDK toolchain (requirements-dev.txt, requirements-infra.txt) to the same
# venv. Needs nothing but Python 3.11+ with its venv module, and make.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
RUN_STAMP := $(VENV)/.installed-run
TEST_STAMP := $(VENV)/.installed-test
# Older name of the full install, still used by the included chaos.mk.
STAMP := $(TEST_STAMP)
# Visible progress: pip says what it collects and installs (no -q).
PIP_INSTALL := $(PY) -m pip install --disable-pip-version-check --progress-bar on

.PHONY: run test test-cockroach lint typecheck unit migrate clean venv test-hidden-tools \
	browser binutils promtool screenshots synth localstack test-localstack

$(PY):
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11+ is required")'
	@echo "==> creating $(VENV) with $$($(PYTHON) --version)"
	@$(PYTHON) -m venv $(VENV)

$(RUN_STAMP): requirements.txt requirements-run.txt pyproject.toml | $(PY)
	@echo "==> installing the runtime packages into $(VENV) (requirements-run.txt; once)"
	$(PIP_INSTALL) -r requirements-run.txt
	@echo "==> installing the te command line into $(VENV) (editable, no dependencies)"
	@$(PY) -c 'import setuptools' 2>/dev/null || $(PIP_INSTALL) 'setuptools>=64'  # 3.12+ venvs lack it
	$(PIP_INSTALL) --no-deps --no-build-isolation -e .
	@touch $@

$(TEST_STAMP): $(RUN_STAMP) requirements-dev.txt requirements-infra.txt
	@echo "==> installing the test and CDK toolchain into $(VENV) (requirements-dev/infra.txt; once)"
	$(PIP_INSTALL) 'pip>=23,<26.3'  # chalice 1.34 needs pip<26.3
	$(PIP_INSTALL) -r requirements-dev.txt -r requirements-infra.txt
	@touch $@

venv: $(TEST_STAMP)

## run: the whole local stack (API + worker + scheduler) on an embedded PostgreSQL, in a
## deployment profile's process shape: PROFILE=full (default: long-lived worker and
## scheduler) or PROFILE=lean (the Lambda handlers invoked every minute, as EventBridge does).
PROFILE ?= full
run: $(RUN_STAMP)
	$(PY) -m chalicelib.local --profile $(PROFILE)

## test: lint (ruff, the import-linter layer contracts), type check, then the whole test
## suite (unit + integration) with the LocalStack end-to-end tests (test-localstack) in a
## second pytest process beside it (their output follows the suite's), then the claim- and
## wake-up-sensitive tests again in CockroachDB's configuration (test-cockroach); it says
## how long the suite took. The suite runs in $(TEST_WORKERS) pytest-xdist processes, a
## test file to one process (each starts its own PostgreSQL, Redis and broker): most of a
## test's time is spent waiting on servers, so more processes than cores still pays.
TEST_WORKERS ?= 3
XDIST := -n $(TEST_WORKERS) --dist loadfile
test: $(TEST_STAMP) lint typecheck browser binutils promtool localstack
	@start=$$(date +%s); ls_log=$$(mktemp); \
	  $(LOCALSTACK_TESTS) > "$$ls_log" 2>&1 & ls_pid=$$!; \
	  trap 'kill $$ls_pid 2>/dev/null; rm -f "$$ls_log"' EXIT; \
	  $(PY) -m pytest $(XDIST) -m "not chaos and not localstack"; suite=$$?; \
	  wait $$ls_pid; ls_status=$$?; \
	  echo "==> the LocalStack end-to-end tests (run beside the suite):"; cat "$$ls_log"; \
	  [ $$suite = 0 ] && [ $$ls_status = 0 ] && \
	  $(MAKE) --no-print-directory test-cockroach && \
	  echo "==> make test: the suite took $$(( $$(date +%s) - start )) s"

## test-cockroach: the worker, scheduler and job-timing tests whose behaviour depends on the claim
## strategy or the wake-up (marker claim_path), again with the settings production uses on
## CockroachDB (no SKIP LOCKED claim, no LISTEN/NOTIFY), PostgreSQL at SERIALIZABLE as
## always. Tests of PostgreSQL-only behaviour are deselected by their marker (the summary
## counts them), never skipped.
test-cockroach: $(TEST_STAMP)
	@echo "==> claim- and wake-up-sensitive tests in CockroachDB's configuration"
	TE_CLAIM_STRATEGY=conditional_update TE_WAKEUP_NOTIFY=off \
	  $(PY) -m pytest $(XDIST) -m "claim_path and not chaos and not postgres_only" \
	  tests/integration/worker tests/integration/scheduler tests/integration/test_api_jobs_timing.py

## localstack: LocalStack in host mode (no Docker) for the end-to-end tests, in its own venv
## $(LS_VENV) on the newest Python >= 3.12 here (pyenv's versions, python3.1x on PATH;
## tests/localstack/pythons.py): requirements-localstack.txt (exact pins), then the host
## Lambda executor (tests/localstack/hostlambda, a test fixture: it only registers the
## plugin, the code runs from the tree). Once. Without such a Python it says so, and the
## LocalStack tests skip saying so too.
LS_VENV := .venv-localstack
LS_STAMP := $(LS_VENV)/.installed
LS_EXECUTOR := tests/localstack/hostlambda
localstack: $(LS_STAMP)
$(LS_STAMP): requirements-localstack.txt $(LS_EXECUTOR)/pyproject.toml | $(PY)
	@py=$$($(PY) tests/localstack/pythons.py) || { echo "==> no LocalStack: $$py"; exit 0; }; \
	  set -e; \
	  if [ ! -x $(LS_VENV)/bin/python ]; then \
	    echo "==> creating $(LS_VENV) with $$($$py --version) ($$py)"; $$py -m venv $(LS_VENV); fi; \
	  echo "==> installing LocalStack into $(LS_VENV) (requirements-localstack.txt; once)"; \
	  $(LS_VENV)/bin/python -m pip install --disable-pip-version-check --progress-bar on \
	    -r requirements-localstack.txt; \
	  tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; cp -r $(LS_EXECUTOR)/. "$$tmp"; \
	  $(LS_VENV)/bin/python -m pip install --disable-pip-version-check --no-deps \
	    --no-build-isolation --force-reinstall "$$tmp"; \
	  touch $@

## test-localstack: the LocalStack end-to-end tests (marker localstack) alone: the deployed
## lean profile in host-mode LocalStack (tests/localstack), and tests/infra's compose stack
## where a Docker daemon is reachable. `make test` runs them beside the main suite.
LOCALSTACK_TESTS := $(PY) -m pytest -m localstack tests/localstack tests/infra/test_localstack_e2e.py
test-localstack: $(TEST_STAMP) localstack
	$(LOCALSTACK_TESTS)

## test-hidden-tools: `make test` in a fresh clone of HEAD, with a PATH of only the venv and
## /usr/bin minus node, redis-server and nginx (proves the project installs what it needs).
test-hidden-tools:
	tests/infra/hidden_tools.sh

## browser: headless Chromium and its WebDriver from Debian's packages, for the dashboard's
## browser tests (tests/browser); installed once, non-interactively, when missing (as root,
## as CI runs; otherwise through sudo). Selenium drives /usr/bin/chromedriver and never
## downloads a browser or driver (SE_OFFLINE, set by the tests).
browser:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then :; else \
	  echo "==> installing chromium and chromium-driver (Debian packages; once)"; \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -q && \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
	    chromium chromium-driver; fi

## binutils: `strip`, which slims the Lambda package's shared objects
## (infra/stacks/packaging.py; tests/infra/test_packaging.py runs it); Debian's binutils,
## installed once, non-interactively, when missing (as root, as CI runs; otherwise sudo).
binutils:
	@if command -v strip >/dev/null; then :; else \
	  echo "==> installing binutils (Debian package, for strip; once)"; \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -q && \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
	    binutils; fi

## promtool: Prometheus' rule checker and unit tester, for the shipped alert rules
## (docs/alerts/prometheus-rules.yml; tests/integration/test_alert_rules.py runs it on real
## /metrics output). Only the promtool binary of Debian's prometheus package, extracted into
## the venv ($(VENV)/bin/promtool): installing the package would also install, enable and
## start a Prometheus server (its postinst does) and a dozen web dependencies, and a test
## machine needs none of them. Once, non-interactively, when missing; apt-get update as
## root (as CI runs; otherwise through sudo), the download itself needs no root.
PROMTOOL := $(VENV)/bin/promtool
promtool: | $(PY)
	@if [ -x $(PROMTOOL) ]; then :; else \
	  echo "==> extracting promtool from Debian's prometheus package into $(VENV) (once)"; \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  AS_ROOT=$$([ "$$(id -u)" = 0 ] && echo "-o APT::Sandbox::User=root"); \
	  tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -q && \
	  (cd "$$tmp" && apt-get download -q $$AS_ROOT prometheus) && \
	  dpkg-deb --fsys-tarfile "$$tmp"/prometheus_*.deb | tar -xO ./usr/bin/promtool \
	    > "$$tmp/promtool" && \
	  install -m 755 "$$tmp/promtool" $(PROMTOOL) && $(PROMTOOL) --version; fi

## screenshots: regenerate the README's dashboard screenshots (docs/*.png) against the real
## stack; the browser tests themselves write theirs to a temporary directory only.
screenshots: $(TEST_STAMP) browser
	TE_UI_SCREENSHOT_DIR=$(CURDIR)/docs $(PY) -m pytest -q -p no:cacheprovider \
	  tests/browser/test_ui_walk.py -k two_clicks

## synth: the AWS stack's CloudFormation template, offline (no credentials, no network, no
## Node.js on PATH): cdk.out/dev.template.json. PROFILE=lean (default full), CDK_OUTDIR=dir,
## AWS_DEFAULT_REGION (default us-east-1), CONTEXT="key=value ..." for other context keys.
## It runs in its own venv, $(SYNTH_VENV), with requirements-synth.txt only (the runtime
## packages, Chalice, the CDK library and the Node.js wheel; no test toolchain).
PROFILE ?= full
CDK_OUTDIR ?= cdk.out
SYNTH_VENV := .venv-synth
SYNTH_STAMP := $(SYNTH_VENV)/.installed
$(SYNTH_STAMP): requirements.txt requirements-synth.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11+ is required")'
	@[ -x $(SYNTH_VENV)/bin/python ] || { echo "==> creating $(SYNTH_VENV) with $$($(PYTHON) --version)"; \
	  $(PYTHON) -m venv $(SYNTH_VENV); }
	@echo "==> installing what synthesis needs into $(SYNTH_VENV) (requirements-synth.txt; once)"
	$(SYNTH_VENV)/bin/python -m pip install --disable-pip-version-check --progress-bar on \
	  'pip>=23,<26.3' -r requirements-synth.txt  # chalice 1.34 needs pip<26.3
	@touch $@
synth: $(SYNTH_STAMP)
	$(SYNTH_VENV)/bin/python infra/synth.py --out $(CDK_OUTDIR) --profile $(PROFILE) \
	  $(foreach pair,$(CONTEXT),--context $(pair))

lint: $(TEST_STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(VENV)/bin/lint-imports --no-cache --no-logo

typecheck: $(TEST_STAMP)
	$(PY) -m mypy

unit: $(TEST_STAMP)
	$(PY) -m pytest tests/unit

## migrate: apply migrations to TE_DATABASE_URL (or the embedded database).
migrate: $(RUN_STAMP)
	TE_LOCAL_MODE=$${TE_LOCAL_MODE:-true} $(PY) -m chalicelib.migrate

clean:
	rm -rf $(VENV) $(LS_VENV) $(SYNTH_VENV) .pytest_cache .mypy_cache .ruff_cache

# Benchmarks (make bench, make bench-quick, make bench-package) live with their scripts.
-include bench/bench.mk
# Fault injection (make chaos): long runs that break things on purpose.
-include chaos.mk
