"""Cross-process wake-up: PostgreSQL NOTIFY when executions become claimable.

An accelerator only. Workers poll (``TE_WORKER_POLL_INTERVAL_MS``) and that poll is what
correctness relies on; a notification merely ends a worker's sleep early so an IMMEDIATE job
is claimed within milliseconds of its commit. CockroachDB has no LISTEN/NOTIFY, so with
``TE_WAKEUP_NOTIFY=auto`` (the default) nothing is sent there; ``on``/``off`` force it.
The mode is handed in by whoever builds a publisher or listener (from the settings): this
module reads no configuration of its own.

Publishers call :func:`publish` inside the transaction that queued executions: PostgreSQL
delivers the notification at COMMIT, and never for a rolled-back transaction. Workers run a
:class:`Listener`: one dedicated connection that LISTENs and calls back on every batch of
notifications.
"""

from __future__ import annotations

import contextlib
import logging
import select
import socket
import threading
from collections.abc import Callable
from typing import Any

import pg8000.native
from pg8000.exceptions import Error as PgError

from chalicelib.db.connection import ConnectionParams, Database, Transaction
from chalicelib.db.queries import queries
from chalicelib.logs import FailureLog

log = logging.getLogger(__name__)

#: The channel wakeup.sql publishes on and listens to.
CHANNEL = "te_executions_queued"

#: The default mode (``TE_WAKEUP_NOTIFY``'s default): notify unless the server is CockroachDB.
AUTO = "auto"

_FLAVOR_ATTR = "_te_is_postgresql"

#: With no notification for this long the listener pings its connection, so a connection
#: that died silently (no FIN, e.g. a network partition) is noticed and replaced.
HEALTH_CHECK_SEC = 30.0
#: Reconnect backoff after the listen connection fails: doubles up to the maximum.
RECONNECT_MIN_SEC = 0.1
RECONNECT_MAX_SEC = 5.0


def _is_postgresql(version: str) -> bool:
    return "cockroachdb" not in version.lower()


def enabled(db: Database, mode: str, tx: Transaction | None = None) -> bool:
    """Whether notifications are used with ``db``.

    ``mode`` is ``TE_WAKEUP_NOTIFY`` (``auto``, ``on`` or ``off``). With ``auto`` the
    server's flavor decides; it is read once per Database (through ``tx`` when given, so a
    publisher does not borrow a second connection inside its transaction).
    """
    if mode in ("on", "off"):
        return mode == "on"
    cached = getattr(db, _FLAVOR_ATTR, None)
    if cached is None:
        query = queries["wakeup_server_version"]
        rows = tx.run(query) if tx is not None else db.run(query)
        cached = _is_postgresql(str(rows[0]["v"]))
        setattr(db, _FLAVOR_ATTR, cached)
    return bool(cached)


def publish(tx: Transaction, db: Database, mode: str) -> None:
    """Queue a wake-up for listening workers, delivered when ``tx`` commits (``mode``: see
    :func:`enabled`)."""
    if enabled(db, mode, tx=tx):
        tx.execute(queries["wakeup_publish"])


def _wait_readable(conn: pg8000.native.Connection, stop_fd: int, timeout: float) -> bool:
    """Block until the server sent something on ``conn`` (True) or ``timeout``/stop (False).

    pg8000 has no public way to wait for notifications: it reads them only while it
    processes a query. This is the one place that touches its private socket attribute
    (``_usock``, pg8000 1.31); if that changes, the AttributeError makes the listener give
    up and the worker keeps plain polling. Bytes already decrypted by TLS are not visible to
    select(), hence the ``pending()`` check.
    """
    sock: socket.socket = conn._usock
    pending = getattr(sock, "pending", None)
    if pending is not None and pending() > 0:
        return True
    sock_fd = sock.fileno()
    readable, _, _ = select.select([sock_fd, stop_fd], [], [], timeout)
    return sock_fd in readable


class Listener:
    """A thread with its own connection that LISTENs on :data:`CHANNEL`.

    ``on_notify`` runs on the listener thread after each batch of notifications, and once
    after every (re)connect, since anything queued while the connection was down was not
    heard. A dropped connection is replaced with exponential backoff; if the driver's
    internals are not what :func:`_wait_readable` expects, the listener stops for good and
    polling alone remains.
    """

    def __init__(
        self,
        params: ConnectionParams,
        on_notify: Callable[[], None],
        *,
        connect: Callable[[], pg8000.native.Connection] | None = None,
    ) -> None:
        self._params = params
        self._on_notify = on_notify
        self._connect = connect or params.connect
        self._stop = threading.Event()
        self._stop_r, self._stop_w = socket.socketpair()
        self._thread: threading.Thread | None = None
        self._conn: pg8000.native.Connection | None = None
        self._pid: int | None = None
        self._failures = FailureLog(log, "LISTEN connection (reconnecting with backoff)")
        self.connects = 0  #: successful LISTENs so far (tests and diagnostics)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="te-listener", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop listening and close the connection (returns within a second)."""
        self._stop.set()
        with contextlib.suppress(OSError):  # already closed by an earlier stop
            self._stop_w.send(b"x")
        if self._thread is not None:
            self._thread.join(timeout=1)
        for end in (self._stop_r, self._stop_w):
            end.close()

    @property
    def backend_pid(self) -> int | None:
        """The listen connection's server pid while connected (tests kill it)."""
        return self._pid

    def _loop(self) -> None:
        delay = RECONNECT_MIN_SEC
        while not self._stop.is_set():
            try:
                self._listen()
                delay = RECONNECT_MIN_SEC
            except AttributeError as exc:
                log.warning("LISTEN unsupported by this pg8000; polling only", exc_info=exc)
                return
            except (PgError, OSError, EOFError) as exc:
                self._failures.failed(exc)  # one traceback, then a line per 30 s
            finally:
                self._close()
            self._stop.wait(delay)
            delay = min(delay * 2, RECONNECT_MAX_SEC)

    def _listen(self) -> None:
        """Connect, LISTEN, and pass notifications on until stopped (raises if dropped)."""
        conn = self._connect()
        self._conn = conn
        conn.run(queries["wakeup_listen"].sql)
        self._pid = int(conn.run(queries["wakeup_backend_pid"].sql)[0][0])
        self._failures.succeeded()
        self.connects += 1
        self._on_notify()
        while not self._stop.is_set():
            readable = _wait_readable(conn, self._stop_r.fileno(), HEALTH_CHECK_SEC)
            if self._stop.is_set():
                return
            # Readable: the notifications are read while this query runs. Not readable:
            # a health check; a dead connection raises here.
            conn.run(queries["wakeup_ping"].sql)
            if readable and _drain(conn):
                self._on_notify()

    def _close(self) -> None:
        conn, self._conn, self._pid = self._conn, None, None
        if conn is not None:
            with contextlib.suppress(Exception):  # the socket may already be gone
                conn.close()


def _drain(conn: Any) -> bool:
    """Empty the connection's notification queue; True if there was anything."""
    notifications = conn.notifications
    found = bool(notifications)
    notifications.clear()
    return found
