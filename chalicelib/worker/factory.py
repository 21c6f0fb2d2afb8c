"""Builds a worker from settings (see the package docstring for the entry points).

Entry points: ``python -m chalicelib.worker`` (long-running process, the Fargate shape) and
the ``run_worker`` Lambda (``chalicelib.worker.lambdas``). Both build a :class:`Worker`
with :func:`build_worker`; tests and the local stack build one the same way and run it in
a thread.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta

from chalicelib.crypto import SecretBox
from chalicelib.db.connection import Database
from chalicelib.domain.backoff import Rand
from chalicelib.domain.regions import ALL_REGIONS, RegionFilter
from chalicelib.settings import Settings
from chalicelib.worker.caches import ConfigCache, SecretCache
from chalicelib.worker.claims import claim_strategy
from chalicelib.worker.dispatchers import Dispatcher, default_dispatchers
from chalicelib.worker.pipeline import Pipeline
from chalicelib.worker.ring import Worker

__all__ = ["Worker", "build_worker"]


def build_worker(
    *,
    db: Database | None = None,
    settings: Settings | None = None,
    secret_box: Callable[[], SecretBox] | None = None,
    dispatchers: Mapping[str, Dispatcher] | None = None,
    clock: Callable[[], datetime] | None = None,
    monotonic: Callable[[], float] = time.monotonic,
    rand: Rand = random.random,
    region: RegionFilter = ALL_REGIONS,
    worker_id: str | None = None,
) -> Worker:
    """A worker wired from settings; every collaborator can be passed in instead."""
    from chalicelib import wiring

    settings = settings or wiring.settings()
    db = db or wiring.database("worker")
    clock = clock or wiring.utcnow
    box = secret_box or _secret_box
    if dispatchers is None:
        dispatchers = default_dispatchers(
            allow_private=settings.allow_private_targets,
            pool_maxsize=settings.worker_max_concurrent,
            clock=clock,
        )
    pipeline = Pipeline(
        configs=ConfigCache(db, settings.config_cache_ttl_sec, monotonic),
        secrets=SecretCache(db, box, settings.secret_cache_ttl_sec, monotonic),
        clock=clock,
        rand=rand,
        rotation_window=timedelta(seconds=settings.signing_rotation_window_sec),
    )
    return Worker(
        db,
        settings,
        claims=claim_strategy(settings.claim_strategy, region),
        pipeline=pipeline,
        dispatchers=dispatchers,
        worker_id=worker_id,
    )


def _secret_box() -> SecretBox:
    from chalicelib import wiring

    current, older = wiring.encryption_keys()
    return SecretBox(current, older)
