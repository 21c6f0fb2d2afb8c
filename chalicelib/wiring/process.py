"""What every process kind shares: settings, database pools, secret keys, logging.

A :class:`ProcessRoot` reads the ``TE_*`` settings, resolves the database URL and the keys
and opens one pool per role, each on first use (never at import), so a Lambda cold start
pays only for what its entry point touches. One root per process; a test that needs a
fresh process builds a new root, and :meth:`ProcessRoot.close` closes its pools.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping

from chalicelib import logs
from chalicelib.crypto import SecretBox
from chalicelib.db.connection import Database
from chalicelib.domain.clock import Clock, utcnow
from chalicelib.errors import ConfigurationError
from chalicelib.runtime.process import Part, ProcessRunner
from chalicelib.settings import Settings, decode_key, load_settings, split_keys
from chalicelib.tracing import Tracing, from_environment

log = logging.getLogger(__name__)

#: The session isolation of each role's single statements. The worker sends its claim,
#: lease renewal and (most) finalize statements alone, without BEGIN/SET/COMMIT: one round
#: trip each instead of four. Each is a guarded compare-and-set (SKIP LOCKED or a status
#: guard, re-checked on the latest row version), which is what READ COMMITTED needs; at
#: SERIALIZABLE they would only abort each other (worker.sql, worker_read_committed).
ISOLATION = {"worker": "read committed"}
#: The session plan_cache_mode of each role's pool on PostgreSQL: each statement is planned
#: once per connection, without its values, and that plan kept. The worker sends a few
#: statements thousands of times a second; planned on every call, the claim cost the
#: database a fifth of its CPU per delivery. The API's reads are written so that their plan
#: made without the values reads no more than one made with them (one statement per filter
#: shape, chalicelib/db/shapes.py; the plan tests run each in both modes). Left to
#: PostgreSQL's default, a statement's plan depended on the planner's luck: after five runs
#: it keeps the generic plan only when its estimate is no worse, so the dead letters' union
#: of seven branches was planned again on every call at one size (0.25 ms of a 0.5 ms
#: statement) and not at another. The scheduler's passes keep the default (their range
#: conditions on times are estimated for the values). Not sent in CockroachDB's
#: configuration (TE_CLAIM_STRATEGY=conditional_update), which caches plans by itself.
PLAN_CACHE_MODE = {"api": "force_generic_plan", "worker": "force_generic_plan"}

Keys = tuple[bytes | None, list[bytes]]


def _secret_from_aws(arn: str) -> str:
    import boto3  # present in the Lambda runtime; only needed in AWS

    response = boto3.client("secretsmanager").get_secret_value(SecretId=arn)
    return str(response["SecretString"])


class ProcessRoot:
    """One process's settings, pools and keys, each resolved once on first use.

    ``env`` defaults to the process environment (read when the settings are first needed);
    ``clock`` is the service clock handed to every service and loop.
    """

    def __init__(
        self,
        env: Mapping[str, str] | None = None,
        *,
        clock: Clock = utcnow,
        tracing: Tracing | None = None,
    ) -> None:
        """``tracing``: the process's OpenTelemetry spans as given (tests); None reads the
        ``OTEL_*`` variables on first use (:func:`chalicelib.tracing.from_environment`)."""
        self.clock = clock
        self._env = env
        self._tracing: tuple[Tracing | None] | None = None if tracing is None else (tracing,)
        self._lock = threading.RLock()
        self._settings: Settings | None = None
        self._url: str | None = None
        self._pools: dict[str, Database] = {}
        self._keys: Keys | None = None
        self._bootstrap_key: tuple[str | None] | None = None

    @property
    def settings(self) -> Settings:
        with self._lock:
            if self._settings is None:
                self._settings = load_settings(self._env)
            return self._settings

    def configure_logging(self) -> None:
        """Install the log handler as ``TE_LOG_FORMAT`` and ``TE_LOG_LEVEL`` say."""
        logs.configure_logging(self.settings.log_format, self.settings.log_level)

    def database_url(self) -> str:
        """TE_DATABASE_URL, else its Secrets Manager ARN, else (local mode only) the embedded one.

        Outside local mode a missing URL is a configuration error: a deployed process must
        never start a private, empty database of its own and report success.
        """
        with self._lock:
            if self._url is None:
                self._url = self._resolve_url()
            return self._url

    def _resolve_url(self) -> str:
        s = self.settings
        if s.database_url:
            return s.database_url
        if s.database_url_secret_arn:
            return _secret_from_aws(s.database_url_secret_arn)
        if not s.local_mode:
            raise ConfigurationError(
                "TE_DATABASE_URL is not set. Set it (or TE_DATABASE_URL_SECRET_ARN) to the "
                "PostgreSQL/CockroachDB URL; the embedded database starts only in local mode "
                "(make run, or TE_LOCAL_MODE=true)."
            )
        # Local mode only: a Lambda never imports the embedded server or the migrations.
        from chalicelib.db import embedded, migrate
        from chalicelib.local.data import resolve_data_dir

        url = embedded.start(resolve_data_dir(s.data_dir))
        migrate.migrate(Database.from_url(url, pool_size=1))
        return url

    def database(self, role: str = "api") -> Database:
        """One pool per role (API 20 connections, worker/scheduler 10 by default)."""
        with self._lock:
            if role not in self._pools:
                self._pools[role] = Database.from_url(
                    self.database_url(),
                    pool_size=self.settings.pool_size(role),
                    isolation=ISOLATION.get(role, "serializable"),
                    plan_cache_mode=(
                        PLAN_CACHE_MODE.get(role)
                        if self.settings.claim_strategy == "skip_locked"
                        else None
                    ),
                )
            return self._pools[role]

    def health_database(self) -> Database:
        """The pool ``GET /health`` reads through (:mod:`chalicelib.health.probe`: short
        socket timeouts, so a stalled database is a 503, not a hang)."""
        from chalicelib.health.probe import health_database

        with self._lock:
            if "health" not in self._pools:
                self._pools["health"] = health_database(self.database_url())
            return self._pools["health"]

    def database_stats(self) -> dict[str, int]:
        """40001 retries and reconnects of this process's pools (logged when it stops)."""
        with self._lock:
            pools = list(self._pools.values())
        return {
            "serialization_retries": sum(db.stats.serialization_retries for db in pools),
            "reconnects": sum(db.stats.reconnects for db in pools),
        }

    def encryption_keys(self) -> Keys:
        """(current key or None, older keys still accepted for decryption)."""
        with self._lock:
            if self._keys is None:
                self._keys = self._resolve_keys()
            return self._keys

    def _resolve_keys(self) -> Keys:
        s = self.settings
        raw = s.secret_encryption_key
        if raw is None and s.secret_encryption_key_secret_arn:
            raw = _secret_from_aws(s.secret_encryption_key_secret_arn)
        if raw is None and s.local_mode:
            from chalicelib.local.data import encryption_key, resolve_data_dir

            raw = encryption_key(resolve_data_dir(s.data_dir))
        current = decode_key(raw, "TE_SECRET_ENCRYPTION_KEY") if raw else None
        older = [
            decode_key(k, "TE_SECRET_DECRYPTION_KEYS") for k in split_keys(s.secret_decryption_keys)
        ]
        return current, older

    def reading_box(self) -> SecretBox:
        """The keyring for reads (decrypting, checking a secret's form); may lack a current key."""
        current, older = self.encryption_keys()
        return SecretBox(current, older)

    def writing_box(self) -> SecretBox:
        """The keyring for writes: 500 naming TE_SECRET_ENCRYPTION_KEY when it is not set."""
        current, older = self.encryption_keys()
        if current is None:
            raise ConfigurationError(
                "TE_SECRET_ENCRYPTION_KEY is not set: secrets cannot be created or rotated. "
                "Set it to 32 random bytes, base64-encoded."
            )
        return SecretBox(current, older)

    @property
    def tracing(self) -> Tracing | None:
        """The spans of traced jobs (None: off, the usual case), configured once."""
        with self._lock:
            if self._tracing is None:
                env = os.environ if self._env is None else self._env
                self._tracing = (from_environment(env),)
            return self._tracing[0]

    def bootstrap_api_key(self) -> str | None:
        """TE_BOOTSTRAP_API_KEY, else in local mode the key generated once into the data dir."""
        with self._lock:
            if self._bootstrap_key is None:
                s = self.settings
                key = s.bootstrap_api_key
                if not key and s.local_mode:
                    from chalicelib.local.data import api_key, resolve_data_dir

                    key = api_key(resolve_data_dir(s.data_dir))
                self._bootstrap_key = (key or None,)
            return self._bootstrap_key[0]

    def close(self) -> None:
        """Close every pool this root opened (the process, or the test, is done with it)."""
        with self._lock:
            pools, self._pools = list(self._pools.values()), {}
        for db in pools:
            db.close()


def run_until_stopped(name: str, part_of: Callable[[ProcessRoot], Part]) -> int:
    """A long-lived process of one part (``python -m chalicelib.worker``, ``...scheduler``):
    run until SIGTERM/SIGINT, stopped in order; its exit status."""
    process = ProcessRoot()
    process.configure_logging()
    runner = ProcessRunner([part_of(process)], name=name, counters=process.database_stats)
    runner.stop_on_signals()
    return runner.exit(runner.run())
