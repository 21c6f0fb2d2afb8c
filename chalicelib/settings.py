"""Settings: the only place that reads ``TE_*`` environment variables.

One frozen object, built lazily on first use (importing ``app.py`` needs no variable).
Every setting of the specification's configuration tables is here with its default, plus
the few this Python/AWS port adds; docs/reference/settings.md lists them all, generated
from this module by docs/reference/generate.py.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from chalicelib.errors import ConfigurationError

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}

CLAIM_STRATEGIES = ("skip_locked", "conditional_update")
PROFILES = ("full", "lean")
#: The scheduler loops a worker invocation may run beside its claim (TE_WORKER_SCHEDULER_LOOPS).
WORKER_HOSTED_LOOPS = ("delayed_promoter", "cron_materializer")


#: An endpoint's name, as chalicelib/domain/names.py rules it (a layer this module may not
#: import; tests/unit/test_settings.py holds the two to one pattern).
ENDPOINT_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
MAX_NAME_LENGTH = 100


def _env_name(attr: str) -> str:
    return "TE_" + attr.upper()


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Every knob of the service. Field ``foo_bar`` is read from ``TE_FOO_BAR``."""

    # Worker (spec: "Worker config").
    worker_max_concurrent: int = 50
    worker_poll_interval_ms: int = 200
    config_cache_ttl_sec: int = 60
    secret_cache_ttl_sec: int = 300
    # Not in the specification (it came with signing-secret rotation): how long a rotated
    # signing secret's previous key still signs deliveries too (0: the new key alone from
    # the rotation on).
    signing_rotation_window_sec: int = 86400
    worker_shutdown_timeout_sec: int = 30
    # Added by this port: the share of a worker's slots one endpoint may hold by default
    # (an endpoint's spec.max_concurrent overrides it), so no endpoint starves the others.
    worker_endpoint_share: float = 0.5
    # The worker's own counters in Prometheus text on http://<host>:<port>/metrics (local
    # and Fargate runs); unset: no server. Loopback by default: exposing it is a choice.
    worker_metrics_port: int | None = None
    worker_metrics_host: str = "127.0.0.1"
    # One variable in the spec with two defaults (worker 10, API 20): unset means "by role".
    db_pool_size: int | None = None
    # Scheduler (spec: "Scheduler config").
    cron_tick_interval_sec: float = 1.0
    cron_batch_size: int = 100
    promote_interval_ms: int = 500
    reclaim_interval_sec: int = 30
    stuck_execution_timeout_sec: int = 300
    # Added by this port: executions a bulk action reads and acts on per transaction.
    bulk_page_size: int = 100
    # Terminal executions (with attempts and logs) older than this are deleted; 0 keeps all.
    execution_retention_days: int = 30
    # Added by this port: bulk operations that ended (DONE, ABORTED, FAILED) longer ago than
    # this are deleted (a RUNNING one never is); 0 keeps all.
    operation_retention_days: int = 7
    # Added by this port: the endpoint that gets an IMMEDIATE job, input
    # {"type": "endpoint.paused", "endpoint", "reason", "at"}, whenever an endpoint pauses
    # itself (410 Gone, or failing for longer than its auto_pause_after_ms); unset: none.
    operator_endpoint: str | None = None
    # API server (spec: "API server config").
    listen_addr: str = "0.0.0.0:8080"
    database_url: str | None = None
    # Added by this port.
    secret_encryption_key: str | None = field(default=None, repr=False)
    # Previous keys still accepted for decryption (comma-separated), for key rotation.
    secret_decryption_keys: str | None = field(default=None, repr=False)
    bootstrap_api_key: str | None = field(default=None, repr=False)
    allow_private_targets: bool = False
    data_dir: str = "./.te-data"
    log_format: str = "text"
    log_level: str = "INFO"
    claim_strategy: str = "skip_locked"
    # Cross-process wake-up by PostgreSQL NOTIFY: auto (on unless CockroachDB), on, off.
    wakeup_notify: str = "auto"
    max_body_bytes: int = 1_048_576
    # How long a process trusts a valid API key without asking the database (revocation
    # takes effect within this); 0 asks on every request.
    api_key_cache_ttl_sec: float = 5.0
    # Requests per second per API key (token bucket, burst = 2x); 0 disables the limiter.
    rate_limit_per_sec: float = 0.0
    # Failed key lookups per second per client address, and in total per process (token
    # buckets, burst = 2x; 0 turns one off): past them an unknown key is a 429 before any
    # query, so wrong keys cannot cost the database a query each.
    failed_auth_per_sec: float = 5.0
    failed_auth_total_per_sec: float = 50.0
    region: str = "default"
    # The deployment's process shape (full or lean; infra/stacks/config.py): /health
    # reports it, and `make run PROFILE=lean` runs lean's shape locally.
    profile: str = "full"
    # Scheduler loops the worker's Lambda invocation runs beside its claim, at their own
    # intervals (comma-separated: delayed_promoter, cron_materializer). The lean profile
    # sets both: its scheduler functions make one pass a minute, the worker runs all minute.
    worker_scheduler_loops: str = ""
    # Local mode (make run): generate a missing encryption key once into data_dir.
    local_mode: bool = False
    # AWS: Secrets Manager ARNs read once per cold start instead of plain env values.
    database_url_secret_arn: str | None = None
    secret_encryption_key_secret_arn: str | None = None

    def pool_size(self, role: str) -> int:
        """Connection pool size: TE_DB_POOL_SIZE, else the spec's default for the role."""
        if self.db_pool_size is not None:
            return self.db_pool_size
        return 20 if role == "api" else 10

    def listen_host_port(self) -> tuple[str, int]:
        host, _, port = self.listen_addr.rpartition(":")
        try:
            return host or "0.0.0.0", int(port)  # noqa: S104
        except ValueError as exc:
            raise ConfigurationError(
                f"TE_LISTEN_ADDR must be host:port, got {self.listen_addr!r}"
            ) from exc


def _convert(name: str, raw: str, default: Any, annotation: str) -> Any:
    kind = annotation.replace(" | None", "")
    try:
        if kind == "bool":
            lowered = raw.strip().lower()
            if lowered in _TRUE:
                return True
            if lowered in _FALSE:
                return False
            raise ValueError(raw)
        if kind == "int":
            return int(raw)
        if kind == "float":
            return float(raw)
    except ValueError as exc:
        raise ConfigurationError(f"{name} must be a {kind}, got {raw!r}") from exc
    return raw


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    """Build settings from ``env`` (default: the process environment) and validate them."""
    source = os.environ if env is None else env
    values: dict[str, Any] = {}
    for f in fields(Settings):
        name = _env_name(f.name)
        if name in source:
            values[f.name] = _convert(name, source[name], f.default, str(f.type))
    settings = Settings(**values)
    _validate(settings)
    return settings


def _validate(settings: Settings) -> None:
    positive = (
        "worker_max_concurrent",
        "worker_poll_interval_ms",
        "cron_batch_size",
        "promote_interval_ms",
        "reclaim_interval_sec",
        "stuck_execution_timeout_sec",
        "max_body_bytes",
        "cron_tick_interval_sec",
        "bulk_page_size",
    )
    for attr in positive:
        if getattr(settings, attr) <= 0:
            raise ConfigurationError(f"{_env_name(attr)} must be positive")
    # 0 has a meaning: no cache (API keys), keep everything (retention).
    for attr in (
        "api_key_cache_ttl_sec",
        "failed_auth_per_sec",
        "failed_auth_total_per_sec",
        "execution_retention_days",
        "operation_retention_days",
        "signing_rotation_window_sec",
    ):
        if getattr(settings, attr) < 0:
            raise ConfigurationError(f"{_env_name(attr)} must be 0 or more")
    port = settings.worker_metrics_port
    if port is not None and not 0 <= port <= 65535:
        raise ConfigurationError("TE_WORKER_METRICS_PORT must be a TCP port (0-65535)")
    if not 0 < settings.worker_endpoint_share <= 1:
        raise ConfigurationError("TE_WORKER_ENDPOINT_SHARE must be in (0, 1]")
    _validate_choices(settings)
    _validate_operator_endpoint(settings.operator_endpoint)
    if settings.secret_encryption_key is not None:
        decode_key(settings.secret_encryption_key, "TE_SECRET_ENCRYPTION_KEY")
    for old in split_keys(settings.secret_decryption_keys):
        decode_key(old, "TE_SECRET_DECRYPTION_KEYS")


def _validate_choices(settings: Settings) -> None:
    if settings.claim_strategy not in CLAIM_STRATEGIES:
        raise ConfigurationError(
            f"TE_CLAIM_STRATEGY must be one of {', '.join(CLAIM_STRATEGIES)}, "
            f"got {settings.claim_strategy!r}"
        )
    if settings.wakeup_notify not in ("auto", "on", "off"):
        raise ConfigurationError("TE_WAKEUP_NOTIFY must be auto, on or off")
    if settings.profile not in PROFILES:
        raise ConfigurationError(
            f"TE_PROFILE must be one of {', '.join(PROFILES)}, got {settings.profile!r}"
        )
    for loop in split_keys(settings.worker_scheduler_loops):
        if loop not in WORKER_HOSTED_LOOPS:
            raise ConfigurationError(
                f"TE_WORKER_SCHEDULER_LOOPS names {loop!r}; the worker may run "
                f"{', '.join(WORKER_HOSTED_LOOPS)}"
            )
    if settings.log_format not in ("text", "json"):
        raise ConfigurationError("TE_LOG_FORMAT must be 'text' or 'json'")


def _validate_operator_endpoint(name: str | None) -> None:
    if name is not None and (len(name) > MAX_NAME_LENGTH or not ENDPOINT_NAME.fullmatch(name)):
        raise ConfigurationError(
            f"TE_OPERATOR_ENDPOINT must be an endpoint name (1-{MAX_NAME_LENGTH} characters "
            "of lowercase letters, digits and single hyphens between them), "
            f"got {name!r}"
        )


def split_keys(raw: str | None) -> list[str]:
    return [part.strip() for part in (raw or "").split(",") if part.strip()]


def decode_key(raw: str, name: str) -> bytes:
    """Decode a base64 32-byte key, with an error that says how to make one."""
    try:
        key = base64.b64decode(raw.strip(), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ConfigurationError(
            f"{name} is not valid base64; generate one with "
            "`python -c 'import base64,os;print(base64.b64encode(os.urandom(32)).decode())'`"
        ) from exc
    if len(key) != 32:
        raise ConfigurationError(f"{name} must decode to 32 bytes, got {len(key)}")
    return key
