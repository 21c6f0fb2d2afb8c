"""Builds and caches the per-process collaborators (database, keyring, clock, logging).

Entry points (routes, scheduled functions, the worker) call these on first use, never at
import time, so a Lambda cold start pays only for what its entry point touches. Services
receive what they need as arguments; nothing else reaches into this module's caches.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from chalicelib import logs
from chalicelib.db.connection import Database
from chalicelib.domain.clock import utcnow as utcnow  # the service clock entry points hand on
from chalicelib.errors import ConfigurationError
from chalicelib.settings import Settings, get_settings

log = logging.getLogger(__name__)

_lock = threading.RLock()
_databases: dict[str, Database] = {}
_cache: dict[str, Any] = {}


def settings() -> Settings:
    return get_settings()


def configure_logging() -> None:
    """Install the log handler as ``TE_LOG_FORMAT`` and ``TE_LOG_LEVEL`` say (entry points)."""
    s = settings()
    logs.configure_logging(s.log_format, s.log_level)


def _secret_from_aws(arn: str) -> str:
    import boto3  # present in the Lambda runtime; only needed in AWS

    response = boto3.client("secretsmanager").get_secret_value(SecretId=arn)
    return str(response["SecretString"])


def database_url() -> str:
    """TE_DATABASE_URL, else its Secrets Manager ARN, else (local mode only) the embedded one.

    Outside local mode a missing URL is a configuration error: a deployed process must
    never start a private, empty database of its own and report success.
    """
    with _lock:
        if "database_url" in _cache:
            return str(_cache["database_url"])
        s = settings()
        if s.database_url:
            url = s.database_url
        elif s.database_url_secret_arn:
            url = _secret_from_aws(s.database_url_secret_arn)
        elif not s.local_mode:
            raise ConfigurationError(
                "TE_DATABASE_URL is not set. Set it (or TE_DATABASE_URL_SECRET_ARN) to the "
                "PostgreSQL/CockroachDB URL; the embedded database starts only in local mode "
                "(make run, or TE_LOCAL_MODE=true)."
            )
        else:
            from chalicelib.db import embedded, migrate
            from chalicelib.local_data import resolve_data_dir

            url = embedded.start(resolve_data_dir(s.data_dir))
            migrate.migrate(Database.from_url(url, pool_size=1))
        _cache["database_url"] = url
        return url


#: The session isolation of each role's single statements. The worker sends its claim,
#: lease renewal and (most) finalize statements alone, without BEGIN/SET/COMMIT: one round
#: trip each instead of four. Each is a guarded compare-and-set (SKIP LOCKED or a status
#: guard, re-checked on the latest row version), which is what READ COMMITTED needs; at
#: SERIALIZABLE they would only abort each other (worker.sql, worker_read_committed).
ISOLATION = {"worker": "read committed"}


def database(role: str = "api") -> Database:
    """One pool per role per process (API 20 connections, worker/scheduler 10 by default)."""
    with _lock:
        if role not in _databases:
            _databases[role] = Database.from_url(
                database_url(),
                pool_size=settings().pool_size(role),
                isolation=ISOLATION.get(role, "serializable"),
            )
        return _databases[role]


def database_stats() -> dict[str, int]:
    """40001 retries and reconnects of this process's pools (logged when a process stops)."""
    with _lock:
        pools = list(_databases.values())
    return {
        "serialization_retries": sum(db.stats.serialization_retries for db in pools),
        "reconnects": sum(db.stats.reconnects for db in pools),
    }


def encryption_keys() -> tuple[bytes | None, list[bytes]]:
    """(current key or None, older keys still accepted for decryption)."""
    from chalicelib.settings import decode_key, split_keys

    with _lock:
        if "keys" in _cache:
            return _cache["keys"]
        s = settings()
        raw = s.secret_encryption_key
        if raw is None and s.secret_encryption_key_secret_arn:
            raw = _secret_from_aws(s.secret_encryption_key_secret_arn)
        if raw is None and s.local_mode:
            from chalicelib.local_data import encryption_key, resolve_data_dir

            raw = encryption_key(resolve_data_dir(s.data_dir))
        current = decode_key(raw, "TE_SECRET_ENCRYPTION_KEY") if raw else None
        older = [
            decode_key(k, "TE_SECRET_DECRYPTION_KEYS") for k in split_keys(s.secret_decryption_keys)
        ]
        _cache["keys"] = (current, older)
        return current, older


def bootstrap_api_key() -> str | None:
    """TE_BOOTSTRAP_API_KEY, else in local mode the key generated once into the data dir."""
    with _lock:
        if "bootstrap_key" not in _cache:
            s = settings()
            key = s.bootstrap_api_key
            if not key and s.local_mode:
                from chalicelib.local_data import api_key, resolve_data_dir

                key = api_key(resolve_data_dir(s.data_dir))
            _cache["bootstrap_key"] = key or None
        cached: str | None = _cache["bootstrap_key"]
        return cached


def require_encryption_key() -> bytes:
    current, _ = encryption_keys()
    if current is None:
        raise ConfigurationError(
            "TE_SECRET_ENCRYPTION_KEY is not set: secrets cannot be created or rotated. "
            "Set it to 32 random bytes, base64-encoded."
        )
    return current


def reset() -> None:
    """Forget every cached collaborator (tests; the local runner after changing env)."""
    with _lock:
        for db in _databases.values():
            db.close()
        _databases.clear()
        _cache.clear()
