# Benchmarks. Included from the Makefile with:  include bench/bench.mk
# Not part of `make test`. Everything they need is installed here: the peers, matplotlib
# and py-spy into their own venv (bench/.work/venv, never .venv), nginx from Debian when
# run as root. Nothing here calls sudo: without root and without nginx it stops and says so.

BENCH_VENV := bench/.work/venv
BENCH_PY := $(BENCH_VENV)/bin/python
BENCH_STAMP := $(BENCH_VENV)/.installed

.PHONY: bench bench-quick bench-profile bench-deps bench-package bench-scale

$(BENCH_STAMP): bench/requirements.txt
	@mkdir -p bench/.work
	@test -x $(BENCH_PY) || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_PY) -m pip install --disable-pip-version-check -q --upgrade pip
	$(BENCH_PY) -m pip install --disable-pip-version-check -q -r bench/requirements.txt
	@touch $@

bench-deps: $(STAMP) $(BENCH_STAMP)
	@command -v nginx >/dev/null 2>&1 || test -x /usr/sbin/nginx || { \
		if [ "$$(id -u)" != 0 ]; then \
			echo "make bench needs nginx (its HTTP sink) and never runs sudo:" \
				"install it as root (apt-get install nginx-light), then run make bench again" >&2; \
			exit 1; \
		fi; \
		echo "installing nginx (the benchmark's HTTP sink)"; \
		apt-get update -qq && \
		{ DEBIAN_FRONTEND=noninteractive apt-get install -y -q nginx-light || \
		  DEBIAN_FRONTEND=noninteractive apt-get install -y -q nginx; }; }

## bench-package: deployment.zip size and cold `import app` (needs only .venv; ~1 minute).
bench-package: $(STAMP)
	$(PY) bench/lambda_package.py

## bench: the full suite (about 30 minutes on two cores); writes bench/results/.
## BENCH_ARGS adds run.py options, e.g. make bench BENCH_ARGS="--rounds 5" (the load spread
## over 20 endpoints is part of the full run; --spread-endpoints K changes K).
bench: bench-deps bench-package
	$(BENCH_PY) bench/run.py $(BENCH_ARGS)

## bench-quick: reduced suite (N=2,000, short latency, 10k scale; < 5 minutes); bench/results/quick/.
bench-quick: bench-deps
	$(BENCH_PY) bench/run.py --quick $(BENCH_ARGS)

## bench-profile: py-spy profiles of the worker (workload 1) and the API (workload 4).
bench-profile: bench-deps
	$(BENCH_PY) bench/profile.py

## bench-scale: every read route, the claim and one pass of each loop at 10^4, 10^5 and
## 10^6 executions of history (about 30-40 minutes at 10^6); bench/results/scale.{json,md}.
## SCALE_ARGS adds scale.py options, e.g. make bench-scale SCALE_ARGS="--max 100000".
bench-scale: $(STAMP) $(BENCH_STAMP)
	$(BENCH_PY) bench/scale.py $(SCALE_ARGS)
