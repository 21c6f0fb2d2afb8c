"""Secrets a process has decrypted stay out of its log lines and its resolvers.

kafka-python logs the bootstrap servers it was given and redis-py quotes a URL it cannot
parse, in their own loggers: :class:`chalicelib.logs.SecretFilter`, on the root handlers,
redacts from every record the values :meth:`SecretBox.decrypt` remembered (whole, any run
of six characters, their encodings). A host holding a secret's value is refused before
any name lookup, for HTTP (the address policy), Redis (even with private targets allowed)
and Kafka (bootstrap and advertised brokers).
"""

from __future__ import annotations

import io
import logging
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from chalicelib.crypto import SecretBox
from chalicelib.domain.redaction import LIVE_SECRETS, LiveSecrets
from chalicelib.logs import SECRET_FILTER, configure_logging
from chalicelib.worker.dispatchers import kafka_guard, redis_guard
from chalicelib.worker.ssrf import BlockedTarget, public_addresses

SECRET = "Zq7k9pX2mWv4sLr8Tb"  # 18 characters


def runs(secret: str = SECRET) -> list[str]:
    return [secret[i : i + 6] for i in range(len(secret) - 5)]


def leaked(text: str, secret: str = SECRET) -> list[str]:
    return [run for run in runs(secret) if run in text]


@pytest.fixture
def decrypted() -> Iterator[str]:
    """SECRET, decrypted once by a SecretBox (as the worker does), forgotten afterwards."""
    box = SecretBox(b"k" * 32)
    assert box.decrypt("pw", box.encrypt("pw", SECRET)) == SECRET
    yield SECRET
    LIVE_SECRETS.clear()


@pytest.fixture
def stderr_lines(monkeypatch: pytest.MonkeyPatch) -> Iterator[io.StringIO]:
    """What the process's configured handler writes (root state restored afterwards)."""
    root = logging.getLogger()
    saved = (list(root.handlers), root.level, logging.getLogger("kafka").level)
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    configure_logging("json", "DEBUG")
    yield stream
    for handler in list(root.handlers):
        handler.removeFilter(SECRET_FILTER)
        if handler not in saved[0]:
            root.removeHandler(handler)
    root.setLevel(saved[1])
    logging.getLogger("kafka").setLevel(saved[2])


def test_third_party_log_lines_carry_no_secret(decrypted: str, stderr_lines: io.StringIO) -> None:
    logging.getLogger("kafka.conn").warning(
        "DNS lookup failed for %s:%d", decrypted, 9092
    )  # as kafka-python words it
    logging.getLogger("redis.connection").error(
        "Port could not be cast to integer value as %r", decrypted[:13]
    )
    logging.getLogger("urllib3.connectionpool").warning(
        "retrying", extra={"url": f"https://h.example/?k={decrypted}"}
    )
    try:
        raise ValueError(f"bad value {decrypted[2:16]}")
    except ValueError:
        logging.getLogger("any.library").exception("failed")
    written = stderr_lines.getvalue()
    assert written.count("\n") == 4 and "[REDACTED]" in written, written
    assert leaked(written) == [], written


def test_the_filter_is_on_every_root_handler(stderr_lines: io.StringIO) -> None:
    assert all(SECRET_FILTER in h.filters for h in logging.getLogger().handlers)


def test_a_host_holding_a_secret_is_never_resolved(decrypted: str) -> None:
    asked: list[Any] = []

    def resolver(*args: Any, **kwargs: Any) -> list[Any]:
        asked.append(args)
        return []

    for host in (f"{decrypted}.attacker.example", decrypted):
        with pytest.raises(BlockedTarget) as refused:
            public_addresses(host, 443, resolver)
        assert leaked(str(refused.value)) == [] and "secret" in str(refused.value)
    with pytest.raises(BlockedTarget):
        kafka_guard.check_bootstrap([f"{decrypted}.example:9092"], resolver)
    for allow_private in (True, False):
        with pytest.raises(BlockedTarget):
            redis_guard.connection_pool(
                f"redis://{decrypted}.example:6379/0",
                allow_private=allow_private,
                resolver=resolver,
            )
    assert asked == []


def test_kafka_refuses_a_secret_host_even_with_private_targets_allowed(decrypted: str) -> None:
    with pytest.raises(BlockedTarget):
        kafka_guard.refuse_secret_hosts(["127.0.0.1:9092", f"[{decrypted}]:9092"])


def test_a_secret_kept_as_a_whole_url_makes_its_host_refused() -> None:
    live = LiveSecrets()
    live.add("https://hooks.example.com/services/T0/B0/abcdef")
    assert live.in_host("hooks.example.com")
    assert not live.in_host("example.com") and not live.in_host("hooks.example.co")
    assert not live.in_host("services")  # a part of a secret that no URL names as host


def test_live_secrets_are_bounded_newest_kept() -> None:
    live = LiveSecrets(max_values=3, max_chars=1000)
    values = ["Aa1Bb2Cc3", "Dd4Ee5Ff6", "Gg7Hh8Ii9", "Jj0Kk1Ll2", "Mm3Nn4Oo5"]
    for value in values:
        live.add(value)
    live.add(values[2])  # used again: the newest
    scrub = live.scrubber()
    assert scrub is not None
    assert scrub(f"{values[0]} {values[1]}") == f"{values[0]} {values[1]}"
    assert scrub(f"{values[2]} {values[4]}") == "[REDACTED] [REDACTED]"
    assert "Aa1" not in repr(live)


def test_short_values_and_event_names_are_left_alone_in_log_lines() -> None:
    """A value shorter than six characters is not looked for in log lines (a letter would
    blank out every word holding it), and a record's ``event`` is a name the code sets:
    alerts match it whole, so a secret sharing six characters with it leaves it intact."""
    live = LiveSecrets()
    live.add("v")
    assert live.scrubber() is None
    LIVE_SECRETS.add("my-secret_token")
    record = logging.LogRecord("t", logging.INFO, "", 0, "recovered: my-secret_token", (), None)
    record.event = "secret_created"
    SECRET_FILTER.use(LIVE_SECRETS.scrubber)
    SECRET_FILTER.filter(record)
    assert "my-secr" not in record.getMessage() and record.getMessage().startswith("recovered")
    assert record.event == "secret_created"
