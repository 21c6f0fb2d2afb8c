"""Cross-process wake-up: PostgreSQL NOTIFY when executions become claimable.

An accelerator only. Workers poll (``TE_WORKER_POLL_INTERVAL_MS``) and that poll is what
correctness relies on; a notification merely ends a worker's sleep early so an IMMEDIATE job
is claimed within milliseconds of its commit. CockroachDB has no LISTEN/NOTIFY, so with
``TE_WAKEUP_NOTIFY=auto`` (the default) nothing is sent there; ``on``/``off`` force it.

Publishers call :func:`publish` inside the transaction that queued executions: PostgreSQL
delivers the notification at COMMIT, and never for a rolled-back transaction.
"""

from __future__ import annotations

from chalicelib.db.connection import Database, Transaction

CHANNEL = "te_executions_queued"

_FLAVOR_ATTR = "_te_notify_enabled"


def enabled(db: Database) -> bool:
    """Whether this database gets notifications (cached per Database)."""
    cached = getattr(db, _FLAVOR_ATTR, None)
    if cached is not None:
        return bool(cached)
    from chalicelib.settings import get_settings

    mode = get_settings().wakeup_notify
    if mode == "off":
        result = False
    elif mode == "on":
        result = True
    else:
        version = str(db.run("SELECT version() AS v")[0]["v"])
        result = "cockroachdb" not in version.lower()
    setattr(db, _FLAVOR_ATTR, result)
    return result


def publish(tx: Transaction, db: Database) -> None:
    """Queue a wake-up for listening workers, delivered when ``tx`` commits."""
    if enabled(db):
        tx.execute(f"SELECT pg_notify('{CHANNEL}', '')")
