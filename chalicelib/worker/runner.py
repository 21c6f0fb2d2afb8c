"""The worker as a part of a process (:class:`~chalicelib.runtime.process.Part`).

The long-lived process, the local stack and each Lambda invocation run a :class:`Worker`
through a :class:`WorkerPart`: claim and deliver until stopped (or ``until()``), then drain
in-flight deliveries for ``drain_timeout()`` seconds and, unless the worker is kept for the
next invocation, close it. The long-lived shapes run the worker's background loops
(heartbeat, region refresher, metrics) beside it until it is closed; a Lambda invocation
runs its own group (heartbeat, hosted scheduler loops) while it claims.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from chalicelib.runtime.group import LoopGroup
from chalicelib.settings import Settings
from chalicelib.worker.background import running, running_background
from chalicelib.worker.worker import Worker


class WorkerPart:
    """Run ``worker`` until :meth:`stop` or ``until()``; drain, then close unless ``keep``.

    ``background`` runs the heartbeat, region refresher and metrics reporter beside it
    until it is closed (the long-lived shapes); ``while_claiming`` is a loop group run only
    while it claims, ended with the claim, before the drain (a Lambda invocation's:
    :func:`~chalicelib.worker.background.lambda_heartbeat`).
    """

    name = "worker"

    def __init__(
        self,
        worker: Worker,
        settings: Settings,
        *,
        drain_timeout: Callable[[], float],
        until: Callable[[], bool] | None = None,
        background: bool = True,
        while_claiming: LoopGroup | None = None,
        keep: bool = False,
    ) -> None:
        self.worker = worker
        self._settings = settings
        self._drain_timeout = drain_timeout
        self._until = until
        self._background = background
        self._while_claiming = while_claiming
        self._keep = keep
        self._stop = threading.Event()

    @property
    def about(self) -> dict[str, Any]:
        return {
            "worker_id": self.worker.worker_id,
            "max_concurrent": self._settings.worker_max_concurrent,
            "claim_strategy": self._settings.claim_strategy,
        }

    def run(self) -> dict[str, Any]:
        with self._beside():
            with self._claiming():
                self.worker.run(self._stop, until=self._until)
            drained = self.worker.drain(self._drain_timeout())
            left = self.worker.in_flight
            if not self._keep:
                self.worker.close(abandon=not drained)
        return {"worker_id": self.worker.worker_id, "drained": drained, "left_running": left}

    def stop(self) -> None:
        self._stop.set()
        self.worker.nudge()  # out of the poll sleep now

    def _beside(self) -> AbstractContextManager[None]:
        if not self._background:
            return nullcontext()
        return running_background(self.worker, self._settings)

    def _claiming(self) -> AbstractContextManager[None]:
        if self._while_claiming is None:
            return nullcontext()
        return running(self._while_claiming, "te-worker-invocation")
