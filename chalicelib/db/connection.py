"""pg8000 connections, a small pool, and the one transaction helper.

Rules this module enforces for every caller:

* Every transaction goes through :meth:`Database.transaction`, which opens it SERIALIZABLE
  whatever the server's default, and retries SQLSTATE
  ``40001`` (serialization failure; CockroachDB's "retry this transaction") and ``40P01``
  (deadlock) with jittered exponential backoff, and raises
  :class:`~chalicelib.errors.TransactionRetriesExhausted` when retries run out.
* A dropped connection is discarded, never reused; the next use connects again. A
  transaction that failed on a dropped connection *before* COMMIT was sent is retried once
  on a fresh connection; one that failed during COMMIT is not (its outcome is unknown) and
  raises :class:`~chalicelib.errors.DatabaseUnavailable`.
* pg8000 exceptions never leave this module: they become errors from ``chalicelib.errors``.

How each statement is sent (prepared once per connection) is :mod:`chalicelib.db.statements`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import queue
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import parse_qs, unquote, urlparse

import pg8000.native
from pg8000.exceptions import DatabaseError as PgDatabaseError
from pg8000.exceptions import InterfaceError as PgInterfaceError

from chalicelib.db.queries import Query
from chalicelib.db.statements import (
    TIMESTAMPTZ_OID,
    execute,
    forget_prepared,
    is_stale_statement,
    server_message,
    sqlstate,
    timestamptz_in,
)
from chalicelib.errors import (
    ConfigurationError,
    DatabaseError,
    DatabaseUnavailable,
    ForeignKeyViolation,
    InvalidData,
    TransactionRetriesExhausted,
    UniqueViolation,
)

log = logging.getLogger(__name__)

T = TypeVar("T")
Row = dict[str, Any]

RETRYABLE_SQLSTATES = frozenset({"40001", "40P01"})

#: Every transaction asks for SERIALIZABLE itself: the service's correctness arguments
#: (setup guards, secret rotation, execution CAS) assume it, and an ordinary PostgreSQL
#: defaults to READ COMMITTED. The worker's documented READ COMMITTED statements lower it
#: with ``SET TRANSACTION`` as their first statement (``worker_read_committed``).
BEGIN = "BEGIN ISOLATION LEVEL SERIALIZABLE"


@dataclass(frozen=True, kw_only=True)
class ConnectionParams:
    """Where and how to connect; parsed from a ``postgresql://`` URL."""

    user: str
    password: str | None = None
    host: str | None = "localhost"
    port: int = 5432
    database: str | None = None
    unix_sock: str | None = None
    ssl: bool = False
    application_name: str = "task-executor"
    #: The session's default isolation: what a single statement sent without BEGIN
    #: (:meth:`Database.statement`, ``transaction(single=True)``) runs at. Explicit
    #: transactions always BEGIN SERIALIZABLE whatever it is.
    isolation: str = "serializable"
    #: The session's ``plan_cache_mode`` (PostgreSQL), None for the server's default: the
    #: worker's PostgreSQL sessions plan each prepared statement once, not on every call
    #: (``force_generic_plan``; chalicelib/wiring/process.py says why).
    plan_cache_mode: str | None = None
    #: Seconds any one socket operation (connect, send, each read) may wait. A server that
    #: is stalled (stopped, swapped out, partitioned) never answers, and its
    #: ``statement_timeout`` cannot fire: only this bounds the wait.
    timeout: float = 30.0

    @classmethod
    def from_url(cls, url: str) -> ConnectionParams:
        """Parse ``postgresql://user:pw@host:port/db?host=/socket/dir&sslmode=require``.

        A ``host`` query parameter that is a directory selects a Unix socket, as libpq does.
        """
        parsed = urlparse(url)
        if parsed.scheme not in ("postgresql", "postgres", "cockroachdb"):
            raise ConfigurationError(
                f"TE_DATABASE_URL must start with postgresql://, got scheme {parsed.scheme!r}"
            )
        query = {k: v[-1] for k, v in parse_qs(parsed.query).items()}
        port = parsed.port or int(query.get("port", 5432))
        socket_dir = query.get("host")
        unix_sock = f"{socket_dir}/.s.PGSQL.{port}" if socket_dir else None
        sslmode = query.get("sslmode", "disable")
        return cls(
            user=unquote(parsed.username or "postgres"),
            password=unquote(parsed.password) if parsed.password else None,
            host=None if unix_sock else (parsed.hostname or "localhost"),
            port=port,
            database=(parsed.path or "/").lstrip("/") or None,
            unix_sock=unix_sock,
            ssl=sslmode not in ("disable", "allow", "prefer"),
            application_name=query.get("application_name", "task-executor"),
        )

    def connect(self) -> pg8000.native.Connection:
        kwargs: dict[str, Any] = {
            "user": self.user,
            "password": self.password,
            "database": self.database,
            "application_name": self.application_name,
            "timeout": self.timeout,
            # Implicit transactions (Database.statement) run at the session's isolation:
            # SERIALIZABLE like the explicit ones (BEGIN), unless a pool asks for READ
            # COMMITTED (the worker's: its statements are guarded compare-and-sets).
            "startup_params": {"default_transaction_isolation": self.isolation},
        }
        if self.plan_cache_mode is not None:
            kwargs["startup_params"]["plan_cache_mode"] = self.plan_cache_mode
        if self.unix_sock:
            kwargs["unix_sock"] = self.unix_sock
        else:
            kwargs["host"] = self.host
            kwargs["port"] = self.port
        if self.ssl:
            import ssl

            kwargs["ssl_context"] = ssl.create_default_context()
        conn = pg8000.native.Connection(**kwargs)
        conn.register_in_adapter(TIMESTAMPTZ_OID, timestamptz_in)
        return conn


def _is_disconnect(exc: BaseException) -> bool:
    if isinstance(exc, PgInterfaceError | OSError | ConnectionError | EOFError):
        return True
    # 57P01 admin shutdown (pg_terminate_backend), 57P02/57P03 crash/cannot connect now,
    # 08xxx connection exceptions.
    state = sqlstate(exc)
    return state is not None and (state.startswith("08") or state in ("57P01", "57P02", "57P03"))


class Transaction:
    """A connection inside an open transaction; runs named queries and returns dict rows."""

    def __init__(self, conn: pg8000.native.Connection) -> None:
        self._conn = conn

    def run(self, query: Query | str, **params: Any) -> list[Row]:
        context = execute(self._conn, query.sql if isinstance(query, Query) else query, params)
        rows, columns = context.rows, context.columns
        if not columns or rows is None:
            return []
        names = [c["name"] for c in columns]
        return [dict(zip(names, row, strict=True)) for row in rows]

    def one(self, query: Query | str, **params: Any) -> Row | None:
        """The first row, or None."""
        rows = self.run(query, **params)
        return rows[0] if rows else None

    def scalar(self, query: Query | str, **params: Any) -> Any:
        row = self.one(query, **params)
        return None if row is None else next(iter(row.values()))

    def execute(self, query: Query | str, **params: Any) -> int:
        """Run a statement and return how many rows it affected."""
        context = execute(self._conn, query.sql if isinstance(query, Query) else query, params)
        return int(context.row_count or 0)


@dataclass(slots=True)
class _Step:
    """How far the runs of one transaction got: which run this is, whether its COMMIT was
    sent (its outcome is then unknown), and which once-only retries are spent."""

    attempt: int = 0
    committing: bool = False
    reconnected: bool = False
    refreshed: bool = False

    def may_reconnect(self) -> bool:
        """Whether a lost connection is retried: once, and never after COMMIT was sent."""
        if self.committing or self.reconnected:
            return False
        self.reconnected = True
        return True


@dataclass
class RetryStats:
    """Counters exported for benchmarks and chaos runs (per process)."""

    serialization_retries: int = 0
    reconnects: int = 0


class Database:
    """A bounded pool of pg8000 connections with the transaction helper."""

    def __init__(
        self,
        params: ConnectionParams,
        *,
        pool_size: int = 10,
        max_retries: int = 12,
        base_delay: float = 0.005,
        max_delay: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
        on_connect: Callable[[pg8000.native.Connection], None] | None = None,
        acquire_timeout: float | None = None,
    ) -> None:
        self.params = params
        self.pool_size = pool_size
        self.max_retries = max_retries
        self._base_delay = base_delay
        self._max_delay = max_delay
        self._sleep = sleep
        self._on_connect = on_connect
        #: How long a caller waits for a free connection; None: as long as it takes.
        self._acquire_timeout = acquire_timeout
        self._idle: queue.LifoQueue[pg8000.native.Connection] = queue.LifoQueue()
        self._slots = threading.BoundedSemaphore(pool_size)
        self.stats = RetryStats()

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        isolation: str = "serializable",
        plan_cache_mode: str | None = None,
        timeout: float | None = None,
        **kwargs: Any,
    ) -> Database:
        """A pool for ``url``; ``isolation``: the session default of its single statements;
        ``plan_cache_mode``: the session's (None: the server's default); ``timeout``: each
        socket operation's (None: :attr:`ConnectionParams.timeout`)."""
        params = dataclasses.replace(
            ConnectionParams.from_url(url), isolation=isolation, plan_cache_mode=plan_cache_mode
        )
        if timeout is not None:
            params = dataclasses.replace(params, timeout=timeout)
        return cls(params, **kwargs)

    # -- connections -------------------------------------------------------------------

    def _new_connection(self) -> pg8000.native.Connection:
        try:
            conn = self.params.connect()
            if self._on_connect is not None:
                self._on_connect(conn)
            return conn
        except Exception as exc:
            raise DatabaseUnavailable(f"cannot connect to the database: {exc}") from exc

    @contextmanager
    def connection(self) -> Iterator[pg8000.native.Connection]:
        """Borrow a connection; it goes back to the pool unless it broke."""
        if not self._slots.acquire(timeout=self._acquire_timeout):
            raise DatabaseUnavailable(
                f"no free database connection within {self._acquire_timeout} s"
            )
        conn: pg8000.native.Connection | None = None
        broken = False
        try:
            try:
                conn = self._idle.get_nowait()
            except queue.Empty:
                conn = self._new_connection()
            yield conn
        except BaseException as exc:
            broken = _is_disconnect(exc) or isinstance(exc, DatabaseUnavailable)
            raise
        finally:
            if conn is not None:
                if broken:
                    self._discard(conn)
                else:
                    self._idle.put(conn)
            self._slots.release()

    def _discard(self, conn: pg8000.native.Connection) -> None:
        self.stats.reconnects += 1
        with contextlib.suppress(Exception):  # the socket is already gone
            conn.close()

    def close(self) -> None:
        """Close idle connections (borrowed ones close when returned broken)."""
        while True:
            try:
                conn = self._idle.get_nowait()
            except queue.Empty:
                return
            with contextlib.suppress(Exception):  # best effort at shutdown
                conn.close()

    # -- transactions ------------------------------------------------------------------

    def transaction(
        self, work: Callable[[Transaction], T], *, name: str = "tx", single: bool = False
    ) -> T:
        """Run ``work`` in a transaction, retrying it whole on 40001/40P01 and reconnects.

        ``work`` must be safe to run again: it must not do network I/O outside the
        database, and it must compute everything from what it reads inside the transaction.

        ``single``: ``work`` runs exactly one statement, sent without BEGIN and COMMIT (one
        round trip instead of three); the server runs it as its own transaction, at
        SERIALIZABLE too (the session default, see :meth:`ConnectionParams.connect`). A lost
        connection is retried once even though the statement may have committed, so it must
        be safe to apply twice (see :meth:`statement`).
        """
        step = _Step()  # one per call, reset per run: the happy path allocates no more
        while True:
            step.attempt += 1
            step.committing = False
            try:
                return self._run_once(work, step, single)
            except PgDatabaseError as exc:
                self._after_database_error(exc, step, name)
            except (PgInterfaceError, OSError, ConnectionError, EOFError) as exc:
                if not step.may_reconnect():
                    raise DatabaseUnavailable(f"{name}: database connection lost: {exc}") from exc

    def _after_database_error(self, exc: PgDatabaseError, step: _Step, name: str) -> None:
        """Returns when the transaction runs again; otherwise raises what its caller gets."""
        if is_stale_statement(exc) and not step.refreshed:
            step.refreshed = True  # prepared again on the next run (db/statements.py)
            return
        if sqlstate(exc) in RETRYABLE_SQLSTATES:
            if step.attempt > self.max_retries:
                raise TransactionRetriesExhausted(
                    f"{name}: still conflicting after {self.max_retries} retries"
                ) from exc
            self.stats.serialization_retries += 1
            self._sleep(self._backoff(step.attempt))
            return
        if _is_disconnect(exc) and step.may_reconnect():
            return
        raise translate_error(exc, name) from exc

    def _run_once(self, work: Callable[[Transaction], T], step: _Step, single: bool) -> T:
        with self.connection() as conn:
            try:
                if single:
                    return work(Transaction(conn))
                return _in_block(conn, work, step)
            except BaseException as exc:
                if is_stale_statement(exc):
                    forget_prepared(conn)
                raise

    def statement(self, query: Query, **params: Any) -> list[Row]:
        """One statement as its own transaction, in one round trip (``single`` above).

        Only for a statement that is safe to apply twice: after a lost connection it is
        sent again without knowing whether the first one committed (``jobs_create`` is, for
        jobs that carry an idempotency key: ON CONFLICT DO NOTHING on it).
        """
        return self.transaction(lambda tx: tx.run(query, **params), name=query.name, single=True)

    def _backoff(self, attempt: int) -> float:
        ceiling = min(self._max_delay, self._base_delay * (2 ** (attempt - 1)))
        return random.uniform(ceiling / 2, ceiling)

    def run(self, query: Query | str, **params: Any) -> list[Row]:
        """One statement in its own transaction."""
        return self.transaction(lambda tx: tx.run(query, **params), name=_query_name(query))

    def execute(self, query: Query | str, **params: Any) -> int:
        return self.transaction(lambda tx: tx.execute(query, **params), name=_query_name(query))


def _query_name(query: Query | str) -> str:
    return query.name if isinstance(query, Query) else "sql"


def _in_block(conn: pg8000.native.Connection, work: Callable[[Transaction], T], step: _Step) -> T:
    """``work`` between BEGIN and COMMIT (rolled back if it fails before COMMIT is sent)."""
    conn.run(BEGIN)
    try:
        result = work(Transaction(conn))
        step.committing = True
        conn.run("COMMIT")
        return result
    except BaseException:
        if not step.committing:
            _rollback_quietly(conn)
        raise


def _rollback_quietly(conn: pg8000.native.Connection) -> None:
    with contextlib.suppress(Exception):  # the original error is the one worth raising
        conn.run("ROLLBACK")


def translate_error(exc: BaseException, name: str) -> DatabaseError:
    """Map a pg8000 error that is not retried to the service's error tree."""
    state = sqlstate(exc)
    message = server_message(exc)
    if state == "23505":
        return UniqueViolation(f"{name}: {message}")
    if state == "23503":
        return ForeignKeyViolation(f"{name}: {message}")
    if _is_disconnect(exc):
        return DatabaseUnavailable(f"{name}: {message}")
    if state is not None and state.startswith("22"):
        # Class 22 (data exception): a value the database cannot store or compare, e.g. an
        # out-of-range number or an invalid byte sequence. The request caused it: 400.
        return InvalidData(f"The database refused a value of the request: {message}.")
    return DatabaseError(f"{name}: {message} (SQLSTATE {state})")
