"""Builds a worker from its settings, pool and keyring.

The composition root (:mod:`chalicelib.wiring.worker`) calls :func:`build_worker` with the
process's collaborators; tests build one the same way and pass what they replace.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta

from chalicelib.crypto import SecretBox
from chalicelib.db.connection import Database
from chalicelib.domain.backoff import Rand
from chalicelib.domain.clock import utcnow
from chalicelib.domain.regions import ALL_REGIONS, RegionFilter
from chalicelib.settings import Settings
from chalicelib.tracing import Tracing
from chalicelib.worker.caches import ConfigCache, SecretCache
from chalicelib.worker.claims import claim_strategy
from chalicelib.worker.dispatchers import Dispatcher, default_dispatchers
from chalicelib.worker.pipeline import Pipeline
from chalicelib.worker.ring import Worker

__all__ = ["Worker", "build_worker"]


def build_worker(
    *,
    db: Database,
    settings: Settings,
    secret_box: Callable[[], SecretBox],
    dispatchers: Mapping[str, Dispatcher] | None = None,
    clock: Callable[[], datetime] = utcnow,
    monotonic: Callable[[], float] = time.monotonic,
    rand: Rand = random.random,
    region: RegionFilter = ALL_REGIONS,
    worker_id: str | None = None,
    tracing: Tracing | None = None,
) -> Worker:
    """A worker over ``db`` as ``settings`` say; the other collaborators can be replaced.
    ``tracing``: spans of traced jobs' claims and attempts (None: off)."""
    if dispatchers is None:
        dispatchers = default_dispatchers(
            allow_private=settings.allow_private_targets,
            pool_maxsize=settings.worker_max_concurrent,
            clock=clock,
        )
    pipeline = Pipeline(
        configs=ConfigCache(db, settings.config_cache_ttl_sec, monotonic),
        secrets=SecretCache(db, secret_box, settings.secret_cache_ttl_sec, monotonic),
        clock=clock,
        rand=rand,
        rotation_window=timedelta(seconds=settings.signing_rotation_window_sec),
        tracing=tracing,
    )
    return Worker(
        db,
        settings,
        claims=claim_strategy(settings.claim_strategy, region),
        pipeline=pipeline,
        dispatchers=dispatchers,
        worker_id=worker_id,
        tracing=tracing,
    )
