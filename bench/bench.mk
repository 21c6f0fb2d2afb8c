# Benchmarks (issue 7). Included from the Makefile with:  include bench/bench.mk
# Not part of `make test`. Everything they need is installed here: the peers, matplotlib
# and py-spy into their own venv (bench/.work/venv, never .venv), nginx from Debian.

BENCH_VENV := bench/.work/venv
BENCH_PY := $(BENCH_VENV)/bin/python
BENCH_STAMP := $(BENCH_VENV)/.installed

.PHONY: bench bench-quick bench-profile bench-deps

$(BENCH_STAMP): bench/requirements.txt
	@mkdir -p bench/.work
	@test -x $(BENCH_PY) || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_PY) -m pip install --disable-pip-version-check -q --upgrade pip
	$(BENCH_PY) -m pip install --disable-pip-version-check -q -r bench/requirements.txt
	@touch $@

bench-deps: $(STAMP) $(BENCH_STAMP)
	@command -v nginx >/dev/null 2>&1 || test -x /usr/sbin/nginx || { \
		echo "installing nginx (the benchmark's HTTP sink)"; \
		SUDO=$$(test "$$(id -u)" = 0 || echo sudo); \
		$$SUDO apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q nginx-light || \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q nginx; }

## bench: the full suite (about 20-25 minutes); writes bench/results/.
bench: bench-deps
	$(BENCH_PY) bench/run.py

## bench-quick: reduced suite (N=2,000, short latency, 10k scale; < 5 minutes); bench/results/quick/.
bench-quick: bench-deps
	$(BENCH_PY) bench/run.py --quick

## bench-profile: py-spy profiles of the worker (workload 1) and the API (workload 4).
bench-profile: bench-deps
	$(BENCH_PY) bench/profile.py
