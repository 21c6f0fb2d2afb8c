# Fault and fuzz runs (long: minutes; no per-test timeout). Included by the Makefile.
# TE_CHAOS_N=1000 make chaos   gives a quick run (default 10,000 executions per fault).
# The schemathesis run (>= 1,000 generated requests) is tests/chaos/test_fuzz_openapi_long.py.
# Figures: bench/results/chaos/<test>.json, printed as a table at the end (even on failure).

.PHONY: chaos
chaos: $(STAMP)
	.venv/bin/python -m pytest tests/chaos -m chaos -p no:cacheprovider -q -o timeout=0; \
	status=$$?; \
	.venv/bin/python -m tests.chaos.report; \
	exit $$status
