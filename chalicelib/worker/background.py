"""The worker process's background loops, as the spec's worker process structure lists them.

* heartbeat writer (every 5 s): ``region_heartbeats`` row ``worker@<host>:<pid>``,
  ``DEAD`` on graceful shutdown, with the states of the worker's loops (these three, and
  the claim and finalize loops: :attr:`Worker.loops`) for ``/health`` and ``/metrics``;
* region status refresher (every 10 s, stub): reads ``region_status``, serves ``["default"]``;
* metrics reporter (every 15 s): one ``worker_metrics`` log line with the worker's counters
  and its pool's 40001 retries and reconnects; at INFO when they moved since the last
  report, at DEBUG when idle (an idle process logs nothing at INFO); with
  ``TE_WORKER_METRICS_PORT`` set, the same counters in Prometheus text on that port
  (:mod:`chalicelib.worker.metrics_http`).

They run as a :class:`~chalicelib.runtime.group.LoopGroup` (the loop runtime the scheduler
uses too; the worker does not import the scheduler), beside :meth:`Worker.run`.

A Lambda invocation runs a smaller group while it claims (:func:`lambda_heartbeat`): the
heartbeat, whose last beat says the next invocation comes within the schedule's period,
and the loops the composition root hands it (the scheduler loops a lean worker hosts). No
metrics reporter or server: the invocation returns its own summary.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from chalicelib.db.connection import Database
from chalicelib.domain import prometheus as prom
from chalicelib.health.heartbeat import ALIVE, DEAD, WORKER, HeartbeatWriter, instance_name
from chalicelib.health.region import RegionRefresher
from chalicelib.logs import log_event
from chalicelib.runtime.group import LoopGroup
from chalicelib.runtime.loop import LoopSpec, Progress
from chalicelib.settings import Settings
from chalicelib.worker.metrics_http import MetricsServer, worker_families
from chalicelib.worker.worker import Worker

log = logging.getLogger("chalicelib.worker")

METRICS_INTERVAL_SEC = 15.0


def worker_counters(worker: Worker) -> dict[str, int]:
    """What the ``worker_metrics`` log line and the metrics port show."""
    pool = worker.database().stats
    held, awaiting_record = worker.occupancy
    return {
        "in_flight": held,
        "awaiting_record": awaiting_record,
        **worker.counts(),
        "serialization_retries": pool.serialization_retries,
        "reconnects": pool.reconnects,
    }


def report_metrics(worker: Worker, last: dict[str, Any] | None = None) -> Progress:
    """Log the worker's counters once (the metrics reporter's iteration).

    ``last`` holds the previous report between iterations: unchanged counters are logged
    at DEBUG only.
    """
    counters = worker_counters(worker)
    idle = last is not None and last == counters
    if last is not None:
        last.clear()
        last.update(counters)
    level = logging.DEBUG if idle else logging.INFO
    log_event(log, "worker_metrics", level, worker_id=worker.worker_id, **counters)
    return Progress()


def worker_heartbeat(worker: Worker, settings: Settings, db: Database) -> HeartbeatWriter:
    """The worker's heartbeat: ``worker@<host>:<pid>``, with the states of its loops."""
    return HeartbeatWriter(
        db,
        kind=WORKER,
        component=instance_name("worker"),
        region=settings.region,
        metadata={"worker_id": worker.worker_id},
        registry=worker.loops,  # claim and finalize too, beside the group's loops
    )


def background_loops(
    worker: Worker,
    settings: Settings,
    db: Database,
    *,
    metrics_interval_sec: float = METRICS_INTERVAL_SEC,
) -> LoopGroup:
    """Heartbeat, region refresher and metrics reporter for ``worker``; ``run(stop)`` them."""
    heartbeat = worker_heartbeat(worker, settings, db)
    last_report: dict[str, Any] = {}
    metrics = LoopSpec(
        name="worker_metrics",
        interval_sec=metrics_interval_sec,
        iteration=lambda: report_metrics(worker, last_report),
    )
    loops = [heartbeat.loop_spec(), RegionRefresher(db).loop_spec(), metrics]
    return LoopGroup(loops, heartbeat=heartbeat, final_status=DEAD, registry=worker.loops)


def lambda_heartbeat(
    worker: Worker,
    settings: Settings,
    db: Database,
    *,
    next_invocation_in: float,
    hosted: Sequence[LoopSpec] = (),
) -> LoopGroup:
    """A Lambda invocation's loops beside its claim: the heartbeat every 5 s and the
    ``hosted`` loops, their states in the worker's registry; once they end, a last ``ALIVE``
    beat that counts until the next invocation (``next_invocation_in`` seconds) is due."""
    heartbeat = worker_heartbeat(worker, settings, db)
    return LoopGroup(
        [heartbeat.loop_spec(), *hosted],
        heartbeat=heartbeat,
        final_status=ALIVE,
        final_next_beat_in=next_invocation_in,
        registry=worker.loops,
    )


@contextmanager
def running(group: LoopGroup, name: str) -> Iterator[None]:
    """Run ``group`` in a thread while the block runs; on exit its loops are stopped and
    waited for (up to 10 s), its last beat written."""
    stop = threading.Event()
    thread = threading.Thread(target=group.run, args=(stop,), name=name)
    thread.daemon = True  # never keeps a stopping process alive
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=10)


@contextmanager
def running_background(worker: Worker, settings: Settings) -> Iterator[None]:
    """Run the background loops while the block runs; a final DEAD heartbeat at the end."""
    server = metrics_server(worker, settings)
    try:
        with running(background_loops(worker, settings, worker.database()), "te-worker-background"):
            yield
    finally:
        if server is not None:
            server.stop()


def metrics_server(worker: Worker, settings: Settings) -> MetricsServer | None:
    """The worker's counters on ``TE_WORKER_METRICS_PORT``, if set (started)."""
    if settings.worker_metrics_port is None:
        return None

    def render() -> str:
        return prom.render(worker_families(worker_counters(worker), worker.worker_id))

    return MetricsServer(settings.worker_metrics_host, settings.worker_metrics_port, render).start()
