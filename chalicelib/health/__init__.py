"""Health: heartbeats, the region stub, and the pool ``GET /health`` reads through.

``heartbeat`` writes each component's sign of life to ``region_heartbeats`` every 5 s,
with its loops' states (read by ``GET /health`` and ``GET /metrics``); ``region`` is the
multi-region stub: it reads ``region_status`` every 10 s and serves ``["default"]`` and
the no-op RegionFilter (what turning regions on would take: docs/explanation/design.md,
"Multi-region: a stub"); ``probe`` builds the short-timeout pool ``GET /health`` reads
through.
"""
