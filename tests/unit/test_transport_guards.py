"""The address policy on Redis and Kafka, decided on addresses from a resolver we control.

Nothing here reaches the network: the resolver is a function of the test, and the test
suite's connect guard (tests/support/netguard.py) refuses, before any packet leaves, a
connect outside loopback; the pinning tests read what it refused to see where the
dispatcher tried to connect.
"""

from __future__ import annotations

import socket
from typing import Any

import pytest

from chalicelib.domain.delivery import DeliveryErrorType, DeliveryRequest
from chalicelib.worker.dispatchers import kafka_guard
from chalicelib.worker.dispatchers.kafka import KafkaDispatcher
from chalicelib.worker.dispatchers.redis_stream import RedisStreamDispatcher

PUBLIC = "93.184.216.34"


def resolver(table: dict[str, str]) -> Any:
    def resolve(host: str, port: int, **_: object) -> list[tuple[Any, ...]]:
        if host not in table:
            raise socket.gaierror(socket.EAI_NONAME, "unknown")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (table[host], port))]

    return resolve


NAMES = resolver(
    {"cache.internal": "10.0.0.5", "meta.internal": "169.254.169.254", "redis.example": PUBLIC}
)


def redis_request(url: str) -> DeliveryRequest:
    spec = {"redis_url": url, "stream": "s", "fields_template": {"a": "1"}, "timeout_ms": 500}
    return DeliveryRequest(execution_id="exe_1", attempt=1, spec=spec)


@pytest.mark.parametrize(
    "url",
    [
        "redis://cache.internal:6379/0",
        "redis://meta.internal:80/0",
        "redis://127.0.0.1:6379/0",
        "redis://[::1]:6379/0",
        "redis://169.254.169.254:80/0",
        "redis://[2002:7f00:1::1]:6379/0",
        "rediss://cache.internal:6380/0",
        "unix:///var/run/redis.sock",
        "unix:///tmp/x.sock?db=0",
    ],
)
def test_redis_targets_inside_the_network_are_refused_before_any_connect(
    url: str, refused_connects: list[Any]
) -> None:
    outcome = RedisStreamDispatcher(allow_private=False, resolver=NAMES).dispatch(
        redis_request(url)
    )
    assert outcome.error is not None
    assert outcome.error["type"] == DeliveryErrorType.CONNECTION_ERROR and not outcome.retryable
    message = outcome.error["message"]
    assert "not an allowed delivery target" in message or "Unix socket" in message
    for leaked in ("10.0.0.5", "169.254.169.254"):
        if leaked not in url:
            assert leaked not in outcome.error["message"]
    assert refused_connects == []


def test_redis_connects_to_the_address_it_checked(refused_connects: list[Any]) -> None:
    """Pinned: the socket goes to the resolver's checked answer, never to a second lookup
    (the suite's guard refuses the connect itself, so nothing is sent)."""
    outcome = RedisStreamDispatcher(allow_private=False, resolver=NAMES).dispatch(
        redis_request("redis://redis.example:6379/0")
    )
    assert outcome.error is not None and outcome.retryable
    assert refused_connects == [("connect", (PUBLIC, 6379))]
    refused_connects.clear()


def kafka_request(servers: str) -> DeliveryRequest:
    spec = {"bootstrap_servers": servers, "topic": "t", "value_template": {}, "timeout_ms": 500}
    return DeliveryRequest(execution_id="exe_1", attempt=1, spec=spec)


@pytest.mark.parametrize(
    "servers",
    [
        "cache.internal:9092",
        "127.0.0.1:9092",
        "kafka.example:9092,meta.internal:9092",
        "[::1]:9092",
    ],
)
def test_kafka_bootstrap_inside_the_network_is_refused_before_any_connect(
    servers: str, refused_connects: list[Any]
) -> None:
    names = resolver(
        {"cache.internal": "10.0.0.5", "meta.internal": "169.254.169.254", "kafka.example": PUBLIC}
    )
    outcome = KafkaDispatcher(allow_private=False, resolver=names).dispatch(kafka_request(servers))
    assert outcome.error is not None and not outcome.retryable
    assert outcome.error["type"] == DeliveryErrorType.CONNECTION_ERROR
    assert "10.0.0.5" not in outcome.error["message"]
    assert refused_connects == []


def test_every_kafka_broker_connection_resolves_through_the_policy() -> None:
    """Advertised brokers too: kafka-python opens each through the policy's socket class."""
    from kafka.errors import KafkaConnectionError
    from kafka.net.inet import KafkaNetSocket

    names = resolver({"broker-1.example": PUBLIC, "broker-2.internal": "10.1.2.3"})
    net = KafkaNetSocket(kafka_guard.proxy_url(names))
    assert net.dns_lookup("broker-1.example", 9093) == [
        (socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (PUBLIC, 9093))
    ]
    for advertised in ("broker-2.internal", "127.0.0.1", "169.254.169.254", "fec0::1"):
        with pytest.raises(KafkaConnectionError, match="not an allowed delivery target"):
            net.dns_lookup(advertised, 9092)


def test_kafka_producer_connects_only_to_checked_addresses(refused_connects: list[Any]) -> None:
    names = resolver({"kafka.example": PUBLIC})
    dispatcher = KafkaDispatcher(allow_private=False, resolver=names)
    try:
        outcome = dispatcher.dispatch(kafka_request("kafka.example:9092"))
    finally:
        dispatcher.close()
    assert outcome.error is not None
    assert refused_connects and set(refused_connects) == {("connect", (PUBLIC, 9092))}
    refused_connects.clear()
