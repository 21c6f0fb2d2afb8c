"""The worker: one ring of stages around one ledger (:class:`Worker`).

    claimer ──▶ starter ──Prepared──▶ delivery loop ──FinishedExecution──▶ finalizer
                   ▲                                                           │
                   └────────── Handback.start (a refill: what it claimed) ──────┘

* :class:`~chalicelib.worker.claimer.Claimer` waits for room, reserves it and claims into
  it (through the worker's store);
* :class:`~chalicelib.worker.starter.Starter` holds what a claim took, resolves each
  request and hands them to the delivery loop;
* :class:`~chalicelib.worker.deliveries.DeliveryLoop` sends each once a send slot is
  free and its lease still holds, and puts the finished execution on the
  :class:`~chalicelib.worker.finished.FinishedQueue`;
* :class:`~chalicelib.worker.finalizer.Finalizer` records a batch of attempts in one
  statement, releases them in the ledger, and refills the freed slots in the same
  statement (PostgreSQL: worker_record_and_claim) or transaction, handing what it claimed
  to the starter through one call (its :class:`~chalicelib.worker.finalizer.Handback`).

Each stage is built with what it needs; nothing is assigned to a built stage. Claims (the
claimer's and the refills) reserve their room in one place, the
:class:`~chalicelib.worker.room.Room`. Each stage writes what it did to the
:class:`~chalicelib.worker.ledger.Ledger` (slots, per-endpoint shares, leases, counts) and
hands its typed output to the next stage; only the refill's hand-back goes back round the
ring. Capacity (``TE_WORKER_MAX_CONCURRENT``) bounds what a worker holds: an execution
takes a slot when it is claimed and gives it back when its attempt is recorded, so every
execution it holds RUNNING is being delivered (or is in the batch being handed out, or
its result is on its way to the database), what it cannot start stays QUEUED
(cancellable, and free for an idle worker), and a crash redelivers at most its capacity.
:class:`~chalicelib.worker.leases.LeaseKeeper` renews the leases of what is held.

Every stage reaches the database through one port, the worker's
:class:`~chalicelib.worker.store.WorkerStore` (claims, records, renewals, the controlled
endpoints, configs and secrets): :class:`~chalicelib.worker.postgres.PostgresStore` in a
deployed worker, :class:`~chalicelib.worker.memory.InMemoryStore` in tests of the stages.
The :class:`~chalicelib.db.connection.Database` a worker may also hold is its pool for what
is not the ring's: the LISTEN accelerator (:mod:`chalicelib.worker.idle`) and the
background loops (heartbeat, metrics).

:class:`Worker` builds the ring and runs it: :meth:`Worker.run` in any thread, then
:meth:`Worker.drain` and :meth:`Worker.close`.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping

from chalicelib.db import notify
from chalicelib.db.connection import Database
from chalicelib.errors import ConfigurationError
from chalicelib.runtime.registry import LoopRegistry
from chalicelib.settings import Settings
from chalicelib.tracing import Tracing
from chalicelib.worker.claimer import Claimer
from chalicelib.worker.deliveries import DeliveryLoop
from chalicelib.worker.dispatchers import Dispatcher
from chalicelib.worker.finalizer import Finalizer
from chalicelib.worker.finished import FinishedQueue
from chalicelib.worker.flow import Controls
from chalicelib.worker.holdings import Holdings
from chalicelib.worker.idle import IdleWait, SleepStats
from chalicelib.worker.leases import LeaseKeeper
from chalicelib.worker.ledger import Ledger
from chalicelib.worker.pipeline import Pipeline
from chalicelib.worker.reporting import ClaimLoopHealth
from chalicelib.worker.room import Room
from chalicelib.worker.send_slots import SendSlots
from chalicelib.worker.starter import Starter
from chalicelib.worker.store import WorkerStore


class Worker:
    """The ring, built from its collaborators; run it with :meth:`run` in any thread."""

    def __init__(
        self,
        settings: Settings,
        *,
        store: WorkerStore,
        pipeline: Pipeline,
        dispatchers: Mapping[str, Dispatcher],
        db: Database | None = None,
        tracing: Tracing | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``store``: the ring's port to the database (its worker id is this worker's);
        ``db``: the pool of the LISTEN accelerator and the background loops (None: neither,
        as over an in-memory store); ``clock``: the ledger's (slots, shares, leases)."""
        self.db = db
        self.store = store
        self.worker_id = store.worker_id
        self.capacity = settings.worker_max_concurrent
        poll_interval = settings.worker_poll_interval_ms / 1000
        self._dispatchers = dispatchers
        self.loops = LoopRegistry()  #: its loops' states (claim, finalize), for its heartbeat
        self._idle = IdleWait(db, settings.wakeup_notify)
        self.ledger = _ledger(settings, wake=self._idle.wake, clock=clock)
        self.leases = LeaseKeeper(store, self.ledger)
        self.controls = Controls(store, poll_interval)
        self.room = Room(self.ledger, self.controls)
        finished = FinishedQueue()
        self._deliveries = DeliveryLoop(
            pipeline, dispatchers, ledger=self.ledger, recorder=finished
        )
        starter = Starter(
            self.room,
            self.ledger,
            pipeline,
            self._deliveries,
            worker_id=self.worker_id,
            tracing=tracing,
        )
        self._finalizer = Finalizer(
            store,
            self.ledger,
            finished,
            room=self.room,
            handback=starter,
            registry=self.loops,
        )
        self.claimer = Claimer(
            store,
            self.room,
            starter,
            controls=self.controls,
            idle=self._idle,
            health=ClaimLoopHealth(self.loops, poll_interval),
        )
        self._stop = threading.Event()

    # -- what it holds and has done --------------------------------------------------------

    def database(self) -> Database:
        """The pool of its background loops (heartbeat, region, metrics)."""
        if self.db is None:
            raise ConfigurationError("this worker has no database pool (an in-memory store)")
        return self.db

    @property
    def in_flight(self) -> int:
        return len(self.ledger)

    @property
    def occupancy(self) -> tuple[int, int]:
        """(:attr:`in_flight`, of those the executions delivered or finished unsent whose
        attempts the finalizer has not recorded yet), read at one instant."""
        return self.ledger.occupancy()

    def counts(self) -> dict[str, int]:
        """Executions claimed and finalized (by outcome) since this worker started."""
        return self.ledger.counts()

    @property
    def refills(self) -> int:
        """Claims made inside finalize transactions (diagnostics; tests read it)."""
        return self._finalizer.refills

    @property
    def sleeps(self) -> SleepStats:
        """How this worker's idle sleeps ended (tests tell a wake-up from a timed-out poll)."""
        return self._idle.stats

    @property
    def listener(self) -> notify.Listener | None:
        """The running LISTEN connection's thread, if any (tests inspect it)."""
        return self._idle.listener

    # -- control -------------------------------------------------------------------------

    def nudge(self) -> None:
        """Work was queued (a notification, an in-process nudge): claim now instead of at
        the end of the current poll sleep, into the reserve too (:meth:`Ledger.nudge`)."""
        self._idle.wake()
        self.ledger.nudge()

    def stop(self) -> None:
        """Stop claiming (signal-handler safe); :meth:`run` returns soon after."""
        self._stop.set()
        self._idle.wake()

    def run(
        self,
        stop_event: threading.Event | None = None,
        *,
        until: Callable[[], bool] | None = None,
    ) -> None:
        """Claim and deliver until :meth:`stop`, ``stop_event`` or ``until()`` says stop.

        Returns without waiting for in-flight executions: call :meth:`drain` for that.
        """

        def stopping() -> bool:
            external = stop_event is not None and stop_event.is_set()
            return self._stop.is_set() or external or (until is not None and until())

        self._start()
        listener = self._idle.listen(self.nudge)
        try:
            self.claimer.run(stopping)
        finally:
            if listener is not None:
                listener.stop()

    def run_once(self) -> int:
        """Claim up to the room once and start the deliveries; returns how many."""
        self._start()
        return self.claimer.run_once()

    def drain(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s until every claimed execution is finalized."""
        return self.ledger.wait_empty(timeout)

    def close(self, *, abandon: bool = False) -> None:
        """Release threads and clients (after :meth:`drain`; ``abandon`` drops what is left)."""
        self._deliveries.close(abandon=abandon)
        self._finalizer.stop(abandon=abandon)
        self.leases.stop()
        for dispatcher in self._dispatchers.values():
            dispatcher.close()

    def _start(self) -> None:
        self._finalizer.start()
        self.leases.start()


def _ledger(settings: Settings, wake: Callable[[], None], clock: Callable[[], float]) -> Ledger:
    """The worker's ledger, sized by ``TE_WORKER_MAX_CONCURRENT`` and shared out by
    ``TE_WORKER_ENDPOINT_SHARE`` on ``clock``; ``wake`` ends the claimer's idle sleep."""
    capacity = settings.worker_max_concurrent
    holdings = Holdings(
        capacity=capacity,
        default_cap=max(1, math.ceil(capacity * settings.worker_endpoint_share)),
        lease_sec=settings.stuck_execution_timeout_sec,
        clock=clock,
    )
    return Ledger(holdings, SendSlots(capacity), wake=wake, clock=clock)
