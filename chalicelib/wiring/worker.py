"""The worker built from its settings, pool and keyring (:func:`build_worker`; tests build
one the same way and pass what they replace, an in-memory store included), and its process
kinds: the long-lived process (Fargate), a Lambda invocation, and the worker part of the
local stack, each a :class:`~chalicelib.worker.runner.WorkerPart` over a worker built from
one :class:`~chalicelib.wiring.process.ProcessRoot`.

``python -m chalicelib.worker`` runs :func:`main`: SIGTERM or SIGINT stops claiming;
in-flight deliveries get up to ``TE_WORKER_SHUTDOWN_TIMEOUT_SEC`` to finish and be
recorded. Whatever is still running then stays RUNNING in the database for the stuck
reclaimer, and the process exits without waiting for those delivery threads.

A Lambda invocation (:class:`LambdaWorker`) beats every 5 s while it claims, and last an
``ALIVE`` beat that counts until the next invocation is due; beside its claim it runs the
loops its container hands it (:mod:`chalicelib.wiring.lambdas`: the scheduler loops
``TE_WORKER_SCHEDULER_LOOPS`` names). This module does not build them: ``python -m
chalicelib.worker`` imports it, and the worker package never imports the scheduler.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from chalicelib.crypto import SecretBox
from chalicelib.db.connection import Database
from chalicelib.domain.backoff import Rand
from chalicelib.domain.clock import utcnow
from chalicelib.domain.regions import ALL_REGIONS, RegionFilter
from chalicelib.errors import ConfigurationError
from chalicelib.logs import log_event
from chalicelib.runtime.loop import LoopSpec
from chalicelib.runtime.process import ProcessRunner
from chalicelib.settings import Settings
from chalicelib.tracing import Tracing
from chalicelib.wiring.process import ProcessRoot, run_until_stopped
from chalicelib.worker.background import lambda_heartbeat
from chalicelib.worker.caches import ConfigCache, SecretCache
from chalicelib.worker.dispatchers import Dispatcher, default_dispatchers
from chalicelib.worker.lambdas import LambdaContext, invocation_limits
from chalicelib.worker.pipeline import Pipeline
from chalicelib.worker.postgres import PostgresStore
from chalicelib.worker.reporting import new_worker_id
from chalicelib.worker.runner import WorkerPart
from chalicelib.worker.store import WorkerStore
from chalicelib.worker.strategies import claim_strategy
from chalicelib.worker.worker import Worker

log = logging.getLogger("chalicelib.worker")


def build_worker(
    *,
    db: Database | None = None,
    settings: Settings,
    secret_box: Callable[[], SecretBox],
    dispatchers: Mapping[str, Dispatcher] | None = None,
    clock: Callable[[], datetime] = utcnow,
    monotonic: Callable[[], float] = time.monotonic,
    rand: Rand = random.random,
    region: RegionFilter = ALL_REGIONS,
    worker_id: str | None = None,
    tracing: Tracing | None = None,
    store: WorkerStore | None = None,
) -> Worker:
    """A worker over ``db`` as ``settings`` say; the other collaborators can be replaced
    (``monotonic``: the caches' and the ledger's clock).
    ``tracing``: spans of traced jobs' claims and attempts (None: off); ``store``: the
    ring's port (None: a :class:`PostgresStore` over ``db`` with the settings' claim
    strategy; given, it brings its own worker id, and ``db`` may be None)."""
    if store is None:
        store = postgres_store(db, settings, region=region, worker_id=worker_id, clock=clock)
    if dispatchers is None:
        dispatchers = default_dispatchers(
            allow_private=settings.allow_private_targets,
            pool_maxsize=settings.worker_max_concurrent,
            clock=clock,
        )
    pipeline = Pipeline(
        configs=ConfigCache(store, settings.config_cache_ttl_sec, monotonic),
        secrets=SecretCache(store, secret_box, settings.secret_cache_ttl_sec, monotonic),
        clock=clock,
        rand=rand,
        rotation_window=timedelta(seconds=settings.signing_rotation_window_sec),
        tracing=tracing,
    )
    return Worker(
        settings,
        store=store,
        pipeline=pipeline,
        dispatchers=dispatchers,
        db=db,
        tracing=tracing,
        clock=monotonic,
    )


def postgres_store(
    db: Database | None,
    settings: Settings,
    *,
    region: RegionFilter = ALL_REGIONS,
    worker_id: str | None = None,
    clock: Callable[[], datetime] = utcnow,
) -> PostgresStore:
    """The deployed worker's store: ``db`` with ``TE_CLAIM_STRATEGY``'s claim and the
    worker's ``clock``."""
    if db is None:
        raise ConfigurationError("a worker needs a database or a store")
    return PostgresStore(
        db,
        worker_id or new_worker_id(),
        claim_strategy(settings.claim_strategy, region),
        operator_endpoint=settings.operator_endpoint,
        clock=clock,
    )


def worker_of(process: ProcessRoot) -> Worker:
    """A worker over the process's ``worker`` pool, clock and keyring."""
    return build_worker(
        db=process.database("worker"),
        settings=process.settings,
        secret_box=process.reading_box,
        clock=process.clock,
        tracing=process.tracing,
    )


def long_lived_part(process: ProcessRoot) -> WorkerPart:
    """The worker with its background loops, draining for TE_WORKER_SHUTDOWN_TIMEOUT_SEC."""
    settings = process.settings
    return WorkerPart(
        worker_of(process), settings, drain_timeout=lambda: settings.worker_shutdown_timeout_sec
    )


def main() -> int:
    """``python -m chalicelib.worker``: run until SIGTERM/SIGINT, drain, exit."""
    return run_until_stopped("worker", long_lived_part)


#: Builds the loops a worker invocation runs beside its claim, once per container.
HostedLoops = Callable[[ProcessRoot], Sequence[LoopSpec]]


class LambdaWorker:
    """One worker per Lambda container, built on the first invocation, kept for warm ones
    with the loops it hosts (``hosted``: built then, so their state lasts as the worker's).

    ``next_invocation_in``: the schedule's period, which an invocation's last heartbeat
    counts on (the next invocation comes by then).
    """

    def __init__(
        self,
        process: ProcessRoot,
        *,
        next_invocation_in: float,
        hosted: HostedLoops = lambda _process: (),
    ) -> None:
        self.process = process
        self._next_invocation_in = next_invocation_in
        self._build_hosted = hosted
        self._lock = threading.Lock()
        self._worker: Worker | None = None
        self._hosted: Sequence[LoopSpec] = ()

    def invoke(self, context: LambdaContext) -> dict[str, Any]:
        """Claim until the invocation's margin, then drain (:mod:`chalicelib.worker.lambdas`);
        the heartbeat and the hosted scheduler loops run while it claims."""
        worker = self._shared()
        until, drain_timeout = invocation_limits(context)
        settings = self.process.settings
        beside = lambda_heartbeat(
            worker,
            settings,
            worker.database(),
            # Not dead: the next invocation comes within the schedule's period.
            next_invocation_in=self._next_invocation_in,
            hosted=self._hosted,
        )
        part = WorkerPart(
            worker,
            settings,
            drain_timeout=drain_timeout,
            until=until,
            background=False,
            while_claiming=beside,
            keep=True,
        )
        outcome = ProcessRunner([part], name="worker", announce=False).run()
        for failure in outcome.failures.values():
            raise failure
        stats = outcome.stats[part.name]
        result = {
            "worker_id": worker.worker_id,
            "drained": stats["drained"],
            "in_flight": worker.in_flight,
            # What each hosted loop did (executions promoted, ticks materialized).
            "hosted": {
                spec.name: beside.stats[spec.name].total
                for spec in self._hosted
                if spec.name in beside.stats
            },
        }
        log_event(log, "worker_invocation_done", **result)
        return result

    def _shared(self) -> Worker:
        with self._lock:
            if self._worker is None:
                self.process.configure_logging()
                self._worker = worker_of(self.process)
                self._hosted = self._build_hosted(self.process)
            return self._worker

    def close(self) -> None:
        """Stop and close the container's worker (tests; the next invocation builds one)."""
        with self._lock:
            worker, self._worker = self._worker, None
        if worker is not None:
            worker.stop()
            worker.close(abandon=not worker.drain(5))
