"""The worker: claims due executions and delivers them over HTTP, Kafka and Redis Streams.

Entry points: ``python -m chalicelib.worker`` (long-running process, the Fargate shape) and
the ``run_worker`` Lambda (``chalicelib.worker.lambdas``). Both build a :class:`Worker`
with :func:`build_worker` (``chalicelib.worker.factory``).

The package itself imports nothing heavy: ``app.py`` registers the worker Lambda through
``chalicelib.worker.lambdas``, and the API Lambda's cold start must not load the database
driver's worker paths, urllib3, kafka-python or redis. ``build_worker`` and ``Worker`` are
loaded on first access.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Worker", "build_worker"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from chalicelib.worker import factory

        return getattr(factory, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
