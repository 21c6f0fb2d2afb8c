"""The pool ``GET /health`` reads through: short socket timeouts, so a stalled database
gets a 503 in bounded time.

A database that is stopped (``SIGSTOP``), swapped out or cut off by a partition accepts
TCP connections (the kernel does) and then never answers; PostgreSQL's
``statement_timeout`` cannot fire in a server that does not run. The API's own pool waits
30 s per socket operation (a slow statement must finish), and a reconnect doubles it:
a load balancer's health check would hang for a minute instead of learning that the
database does not answer. This pool is separate so that its short timeout never cuts an
ordinary request's statement.
"""

from __future__ import annotations

from chalicelib.db.connection import Database

#: Seconds each socket operation of a health read may wait (connect, send, each read).
#: One read and one reconnect: /health answers within about twice this.
HEALTH_TIMEOUT_SEC = 2.0
#: Connections kept for health checks; a check waits at most :data:`HEALTH_TIMEOUT_SEC`
#: for one of them, then answers 503 like a database that does not answer.
HEALTH_POOL_SIZE = 2


def health_database(url: str) -> Database:
    """A small pool on ``url`` whose every wait is bounded by :data:`HEALTH_TIMEOUT_SEC`."""
    return Database.from_url(
        url,
        pool_size=HEALTH_POOL_SIZE,
        timeout=HEALTH_TIMEOUT_SEC,
        acquire_timeout=HEALTH_TIMEOUT_SEC,
    )
