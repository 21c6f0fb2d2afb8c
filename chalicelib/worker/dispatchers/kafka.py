"""Kafka delivery with one shared kafka-python producer per (brokers, acks, timeout).

``kafka`` is imported on first use so the API Lambda never pays for it. Producer timeouts
(bootstrap, metadata, request, delivery) are all bounded by the endpoint's ``timeout_ms``:
kafka-python's defaults would wait 30-120 s for a dead broker.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from chalicelib.domain.delivery import (
    DeliveryErrorType,
    DeliveryOutcome,
    DeliveryRequest,
    failed,
    succeeded,
)

DEFAULT_TIMEOUT_MS = 10000
EXECUTION_HEADER = "X-Task-Executor-Execution-Id"
ATTEMPT_HEADER = "X-Task-Executor-Attempt"
_ACKS = {"0": 0, "1": 1, "all": "all", "-1": "all"}

ProducerKey = tuple[str, str, int]


class KafkaDispatcher:
    """Produces one record per attempt and waits for the broker's acknowledgement."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._producers: dict[ProducerKey, Any] = {}

    def dispatch(self, request: DeliveryRequest) -> DeliveryOutcome:
        from kafka.errors import KafkaError, KafkaTimeoutError

        spec = request.spec
        timeout_ms = int(spec.get("timeout_ms") or DEFAULT_TIMEOUT_MS)
        servers = str(spec.get("bootstrap_servers") or "")
        acks = str(spec.get("acks", "all"))
        if acks not in _ACKS or not servers or not isinstance(spec.get("topic"), str):
            return failed(
                DeliveryErrorType.BROKER_ERROR,
                "resolved spec needs bootstrap_servers, a topic and acks in 0, 1, all",
                retryable=False,
            )
        try:
            producer = self._producer((servers, acks, timeout_ms))
        except KafkaError as exc:
            return failed(DeliveryErrorType.BROKER_ERROR, f"cannot reach the brokers: {exc}")
        try:
            future = producer.send(spec["topic"], **_record(request))
            metadata = future.get(timeout=timeout_ms / 1000)
        except KafkaTimeoutError:
            return failed(DeliveryErrorType.TIMEOUT, f"no acknowledgement within {timeout_ms} ms")
        except KafkaError as exc:
            return failed(DeliveryErrorType.BROKER_ERROR, f"broker rejected the record: {exc}")
        return succeeded({"partition": metadata.partition, "offset": metadata.offset})

    def _producer(self, key: ProducerKey) -> Any:
        # Held while connecting: a second thread for the same brokers waits instead of
        # opening a second producer.
        with self._lock:
            producer = self._producers.get(key)
            if producer is None:
                producer = _new_producer(*key)
                self._producers[key] = producer
            return producer

    def close(self) -> None:
        with self._lock:
            producers, self._producers = list(self._producers.values()), {}
        for producer in producers:
            producer.close(timeout=1)


def _new_producer(servers: str, acks: str, timeout_ms: int) -> Any:
    from kafka import KafkaProducer

    return KafkaProducer(
        bootstrap_servers=[s.strip() for s in servers.split(",") if s.strip()],
        acks=_ACKS[acks],
        linger_ms=0,
        # Idempotence needs acks=all; with 0/1 asked for explicitly it must be off.
        enable_idempotence=acks == "all",
        bootstrap_timeout_ms=timeout_ms,
        request_timeout_ms=timeout_ms,
        delivery_timeout_ms=timeout_ms,
        max_block_ms=timeout_ms,
    )


def _as_bytes(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    return json.dumps(value, separators=(",", ":")).encode("utf-8")


def _record(request: DeliveryRequest) -> dict[str, Any]:
    spec = request.spec
    key = spec.get("key_template")
    headers = [(str(k), _as_bytes(v)) for k, v in (spec.get("headers") or {}).items()]
    headers.append((EXECUTION_HEADER, request.execution_id.encode()))
    headers.append((ATTEMPT_HEADER, str(request.attempt).encode()))
    return {
        "key": None if key is None else _as_bytes(key),
        "value": _as_bytes(spec.get("value_template")),
        "headers": headers,
    }
