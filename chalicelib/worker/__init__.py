"""The worker: claims due executions and delivers them over HTTP, Kafka and Redis Streams.

Entry points: ``python -m chalicelib.worker`` (long-running process, the Fargate shape) and
the ``run_worker`` Lambda (``chalicelib.worker.lambdas``). Both build a :class:`Worker`
with :func:`chalicelib.wiring.worker.build_worker`, in the composition root.

The package itself imports nothing heavy: ``app.py`` registers the worker Lambda through
``chalicelib.worker.lambdas``, and the API Lambda's cold start must not load the database
driver's worker paths, urllib3, kafka-python or redis. ``Worker`` is loaded on first
access.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Worker"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from chalicelib.worker import worker

        return getattr(worker, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
