"""In-process wake-up: code that queues an execution can nudge a worker in the same process.

An accelerator only (the local stack runs API and worker in one process): the worker's
poll loop remains the correct path, and in AWS nothing is registered, so :func:`notify` is
a no-op. Importing this module costs nothing (no worker code is loaded).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

_lock = threading.Lock()
_listeners: list[Callable[[], None]] = []


def register(listener: Callable[[], None]) -> Callable[[], None]:
    """Call ``listener`` on every :func:`notify`; returns a function that unregisters it."""
    with _lock:
        _listeners.append(listener)

    def unregister() -> None:
        with _lock:
            if listener in _listeners:
                _listeners.remove(listener)

    return unregister


def notify() -> None:
    """An execution was queued (call after the commit): wake registered workers."""
    with _lock:
        listeners = list(_listeners)
    for listener in listeners:
        listener()
