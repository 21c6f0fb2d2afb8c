"""Settings: defaults from the spec's tables, TE_* parsing, validation with clear errors."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest

from chalicelib import settings as settings_module
from chalicelib.domain import names
from chalicelib.errors import ConfigurationError
from chalicelib.settings import Settings, decode_key, load_settings, split_keys

KEY = base64.b64encode(bytes(32)).decode()


def test_defaults_match_the_specification() -> None:
    s = load_settings({})
    assert (s.worker_max_concurrent, s.worker_poll_interval_ms) == (50, 200)
    assert (s.config_cache_ttl_sec, s.secret_cache_ttl_sec) == (60, 300)
    assert s.worker_shutdown_timeout_sec == 30
    assert (s.cron_tick_interval_sec, s.cron_batch_size, s.promote_interval_ms) == (1.0, 100, 500)
    assert (s.reclaim_interval_sec, s.stuck_execution_timeout_sec) == (30, 300)
    assert s.listen_addr == "0.0.0.0:8080"
    assert s.database_url is None and s.secret_encryption_key is None
    assert s.allow_private_targets is False and s.data_dir == "./.te-data"
    assert (s.execution_retention_days, s.operation_retention_days) == (30, 7)
    assert (s.pool_size("api"), s.pool_size("worker"), s.pool_size("scheduler")) == (20, 10, 10)


def test_values_are_read_from_te_variables_with_types() -> None:
    s = load_settings(
        {
            "TE_WORKER_MAX_CONCURRENT": "7",
            "TE_CRON_TICK_INTERVAL_SEC": "0.25",
            "TE_ALLOW_PRIVATE_TARGETS": "yes",
            "TE_DB_POOL_SIZE": "3",
            "TE_DATABASE_URL": "postgresql://u@h/db",
            "TE_SECRET_ENCRYPTION_KEY": KEY,
            "UNRELATED": "x",
        }
    )
    assert s.worker_max_concurrent == 7 and s.cron_tick_interval_sec == 0.25
    assert s.allow_private_targets is True and s.pool_size("api") == 3
    assert s.database_url == "postgresql://u@h/db"


def test_secrets_are_not_in_the_repr() -> None:
    s = load_settings({"TE_SECRET_ENCRYPTION_KEY": KEY, "TE_BOOTSTRAP_API_KEY": "boot-secret"})
    assert KEY not in repr(s) and "boot-secret" not in repr(s)


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        ({"TE_WORKER_MAX_CONCURRENT": "many"}, "TE_WORKER_MAX_CONCURRENT must be a int"),
        ({"TE_ALLOW_PRIVATE_TARGETS": "maybe"}, "TE_ALLOW_PRIVATE_TARGETS"),
        ({"TE_CRON_BATCH_SIZE": "0"}, "TE_CRON_BATCH_SIZE must be positive"),
        ({"TE_CRON_TICK_INTERVAL_SEC": "-1"}, "TE_CRON_TICK_INTERVAL_SEC"),
        ({"TE_CLAIM_STRATEGY": "magic"}, "TE_CLAIM_STRATEGY"),
        ({"TE_WORKER_ENDPOINT_SHARE": "0"}, "TE_WORKER_ENDPOINT_SHARE"),
        ({"TE_WORKER_ENDPOINT_SHARE": "1.5"}, "TE_WORKER_ENDPOINT_SHARE"),
        ({"TE_LOG_FORMAT": "xml"}, "TE_LOG_FORMAT"),
        ({"TE_OPERATION_RETENTION_DAYS": "-1"}, "TE_OPERATION_RETENTION_DAYS must be 0 or more"),
        ({"TE_SECRET_ENCRYPTION_KEY": "not base64!"}, "not valid base64"),
        ({"TE_SECRET_ENCRYPTION_KEY": base64.b64encode(b"short").decode()}, "32 bytes"),
        ({"TE_SECRET_DECRYPTION_KEYS": f"{KEY},bad!"}, "TE_SECRET_DECRYPTION_KEYS"),
        ({"TE_OPERATOR_ENDPOINT": "Ops Team"}, "TE_OPERATOR_ENDPOINT must be an endpoint name"),
        ({"TE_OPERATOR_ENDPOINT": ""}, "TE_OPERATOR_ENDPOINT must be an endpoint name"),
        ({"TE_OPERATOR_ENDPOINT": "o" * 101}, "TE_OPERATOR_ENDPOINT must be an endpoint name"),
    ],
)
def test_bad_values_are_configuration_errors_naming_the_variable(
    env: dict[str, str], fragment: str
) -> None:
    with pytest.raises(ConfigurationError, match=fragment):
        load_settings(env)


def test_keys_helpers() -> None:
    assert split_keys(None) == [] and split_keys(" a , ,b ") == ["a", "b"]
    assert decode_key(f"  {KEY}\n", "X") == bytes(32)


def test_listen_addr() -> None:
    assert Settings(listen_addr="127.0.0.1:9000").listen_host_port() == ("127.0.0.1", 9000)
    assert Settings(listen_addr=":8081").listen_host_port() == ("0.0.0.0", 8081)
    with pytest.raises(ConfigurationError, match="TE_LISTEN_ADDR"):
        Settings(listen_addr="nowhere").listen_host_port()


def test_settings_are_frozen() -> None:
    with pytest.raises(AttributeError):
        load_settings({}).data_dir = "/tmp"  # type: ignore[misc]


def test_a_missing_database_url_outside_local_mode_is_a_startup_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Never a silently started embedded database in a deployment."""
    from chalicelib.wiring.process import ProcessRoot

    for name in list(os.environ):
        if name.startswith("TE_") and not name.startswith("TE_TEST_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("TE_DATA_DIR", str(tmp_path / "data"))
    process = ProcessRoot()
    with pytest.raises(ConfigurationError, match="TE_DATABASE_URL is not set"):
        process.database("worker")
    assert not (tmp_path / "data").exists()


def test_the_operator_endpoint_is_read_and_named_as_endpoints_are() -> None:
    assert load_settings({}).operator_endpoint is None
    assert load_settings({"TE_OPERATOR_ENDPOINT": "ops-alerts"}).operator_endpoint == "ops-alerts"
    # settings may not import the domain: its copy of the name rule is the domain's.
    assert settings_module.ENDPOINT_NAME.pattern == names.ENDPOINT_NAME.pattern
    assert settings_module.MAX_NAME_LENGTH == names.MAX_NAME_LENGTH
