"""The scheduler's scans use their partial indexes (checked with sequential scans disabled,
since on tiny test tables the planner would rightly prefer them)."""

from __future__ import annotations

import pytest

from chalicelib.db.connection import Database, Transaction
from chalicelib.db.queries import queries, regional
from chalicelib.domain.regions import ALL_REGIONS
from tests.support.seed.scheduler import T0


@pytest.mark.parametrize(
    ("name", "index", "params"),
    [
        ("scheduler_cron_due_jobs", "idx_jobs_cron_due", {"now": T0, "batch": 100}),
        (
            "scheduler_promote_due",
            "idx_executions_pending",
            {"horizon": T0, "batch": 100, "from_statuses": ["PENDING"], "message": "m"},
        ),
        (
            "scheduler_reclaim_stuck",
            "idx_executions_running",
            {
                "now": T0,
                "cutoff": T0,
                "timeout_sec": "300",
                "batch": 100,
                "from_statuses": ["RUNNING"],
            },
        ),
    ],
)
def test_scan_uses_its_partial_index(
    database: Database, name: str, index: str, params: dict[str, object]
) -> None:
    sql, extra = regional(queries[name], ALL_REGIONS)

    def explain(tx: Transaction) -> str:
        # SET LOCAL ends with the transaction; plain EXPLAIN does not run the statement.
        tx.run("SET LOCAL enable_seqscan = off")
        rows = tx.run("EXPLAIN " + sql, **params, **extra)
        return "\n".join(str(next(iter(r.values()))) for r in rows)

    assert index in database.transaction(explain)
