"""Multi-region health, stubbed: present and running, not acting.

``heartbeat`` writes each component's sign of life to ``region_heartbeats`` every 5 s,
with its loops' states (read by ``GET /health`` and ``GET /metrics``);
``region`` reads ``region_status`` every 10 s and serves ``["default"]`` and a no-op
RegionFilter; ``evaluator`` (the failover decision) is defined but inactive; ``probe``
builds the short-timeout pool ``GET /health`` reads through.
"""
