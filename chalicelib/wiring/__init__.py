"""The composition root: builds everything a process needs, one module per process kind.

* :mod:`~chalicelib.wiring.process`: what every process shares (:class:`ProcessRoot`:
  settings, database pools, keys, logging), built on first use, never at import time.
* :mod:`~chalicelib.wiring.api`: the API's services and guards (:class:`ApiRoot`).
* :mod:`~chalicelib.wiring.worker` and :mod:`~chalicelib.wiring.scheduler`: the worker
  and the scheduler as parts of a process (long-lived, or one Lambda invocation).
* :mod:`~chalicelib.wiring.app`: the Chalice app (API routes and the scheduled functions).
* :mod:`~chalicelib.wiring.local`: the local stack (``make run``).

State lives in the objects built here, not in module globals: a test (or the local stack
after changing the environment) that needs a fresh process builds a new root. Only entry
points import this package (``app.py``, the ``python -m`` mains, the local stack): the
import-linter contract ``root-at-entry-points`` holds them to it.
"""
