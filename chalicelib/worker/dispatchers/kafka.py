"""Kafka delivery with one shared kafka-python producer per (brokers, acks, timeout).

``kafka`` is imported on first use so the API Lambda never pays for it. Producer timeouts
(bootstrap, metadata, request, delivery) are all bounded by the endpoint's ``timeout_ms``:
kafka-python's defaults would wait 30-120 s for a dead broker.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from chalicelib.domain.delivery import (
    MAX_REQUEST_BYTES,
    DeliveryErrorType,
    DeliveryOutcome,
    DeliveryRequest,
    failed,
    succeeded,
)
from chalicelib.domain.signing import webhook_headers
from chalicelib.worker.dispatchers import kafka_guard
from chalicelib.worker.ssrf import BlockedTarget, Resolver

DEFAULT_TIMEOUT_MS = 10000
EXECUTION_HEADER = "X-Task-Executor-Execution-Id"
ATTEMPT_HEADER = "X-Task-Executor-Attempt"
_ACKS = {"0": 0, "1": 1, "all": "all", "-1": "all"}

ProducerKey = tuple[str, str, int]

#: How long a failed connect to a set of brokers is remembered (deliveries to it fail fast).
FAILED_CONNECT_TTL_SEC = 1.0
#: The largest record the producer sends: what the rendered-request limit lets through,
#: plus room for the record's framing and our headers (kafka-python's default, 1 MiB,
#: would refuse renders the limit allows).
MAX_RECORD_BYTES = MAX_REQUEST_BYTES + 64 * 1024


class KafkaDispatcher:
    """Produces one record per attempt and waits for the broker's acknowledgement.

    With ``allow_private`` off, the bootstrap servers are checked when a producer is made
    and every broker connection (advertised brokers too) resolves through the address
    policy (:mod:`.kafka_guard`).
    """

    def __init__(
        self,
        *,
        allow_private: bool,
        resolver: Resolver = socket.getaddrinfo,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._allow_private = allow_private
        self._resolver = resolver
        self._lock = threading.Lock()  # guards the dicts below, never held while connecting
        self._producers: dict[ProducerKey, Any] = {}
        self._connecting: dict[ProducerKey, threading.Lock] = {}
        self._failed: dict[ProducerKey, tuple[float, Exception]] = {}
        self._clock = clock

    def dispatch(self, request: DeliveryRequest) -> DeliveryOutcome:
        from kafka.errors import KafkaError, KafkaTimeoutError, MessageSizeTooLargeError

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
        except BlockedTarget as exc:
            return failed(DeliveryErrorType.CONNECTION_ERROR, str(exc), retryable=False)
        except ValueError as exc:  # kafka-python refuses a malformed host:port this way
            return failed(
                DeliveryErrorType.BROKER_ERROR, f"invalid bootstrap_servers: {exc}", retryable=False
            )
        except KafkaError as exc:
            return failed(DeliveryErrorType.BROKER_ERROR, f"cannot reach the brokers: {exc}")
        try:
            future = producer.send(spec["topic"], **_record(request))
            metadata = future.get(timeout=timeout_ms / 1000)
        except KafkaTimeoutError:
            return failed(DeliveryErrorType.TIMEOUT, f"no acknowledgement within {timeout_ms} ms")
        except MessageSizeTooLargeError as exc:  # the broker's message.max.bytes: no retry
            return failed(
                DeliveryErrorType.REQUEST_TOO_LARGE,
                f"the record is larger than the broker accepts: {exc}",
                retryable=False,
            )
        except KafkaError as exc:
            return failed(DeliveryErrorType.BROKER_ERROR, f"broker rejected the record: {exc}")
        return succeeded({"partition": metadata.partition, "offset": metadata.offset})

    def _producer(self, key: ProducerKey) -> Any:
        """The shared producer for ``key``, connecting once per key.

        Only threads for the same brokers wait for a connect (other clusters and transports
        keep flowing); a failed connect is remembered for :data:`FAILED_CONNECT_TTL_SEC` so
        the waiting threads and the next deliveries fail fast instead of each waiting out
        ``timeout_ms`` against a dead broker.
        """
        with self._lock:
            producer = self._producers.get(key)
            if producer is not None:
                return producer
            connecting = self._connecting.setdefault(key, threading.Lock())
        with connecting:
            with self._lock:
                producer = self._producers.get(key)
                failure = self._failed.get(key)
            if producer is not None:
                return producer
            if failure is not None and self._clock() - failure[0] < FAILED_CONNECT_TTL_SEC:
                raise _again(failure[1])
            try:
                producer = self._new_producer(*key)
            except Exception as exc:
                with self._lock:
                    self._failed[key] = (self._clock(), exc)
                raise
            with self._lock:
                self._producers[key] = producer
                self._failed.pop(key, None)
            return producer

    def close(self) -> None:
        with self._lock:
            producers, self._producers = list(self._producers.values()), {}
        for producer in producers:
            producer.close(timeout=1)

    def _new_producer(self, servers: str, acks: str, timeout_ms: int) -> Any:
        bootstrap = [s.strip() for s in servers.split(",") if s.strip()]
        if self._allow_private:
            kafka_guard.refuse_secret_hosts(bootstrap)  # kafka-python's lookup would send it
            return _new_producer(bootstrap, acks, timeout_ms, proxy_url=None)
        kafka_guard.check_bootstrap(bootstrap, self._resolver)
        policy = kafka_guard.proxy_url(self._resolver)
        return _new_producer(bootstrap, acks, timeout_ms, proxy_url=policy)


def _again(exc: Exception) -> Exception:
    """A fresh copy of a remembered failure (one shared object would collect tracebacks)."""
    try:
        return type(exc)(*exc.args)
    except Exception:  # an exception class with another signature
        return exc


def _new_producer(
    bootstrap: list[str], acks: str, timeout_ms: int, *, proxy_url: str | None
) -> Any:
    from kafka import KafkaProducer

    return KafkaProducer(
        bootstrap_servers=bootstrap,
        proxy_url=proxy_url,
        acks=_ACKS[acks],
        linger_ms=0,
        # Idempotence needs acks=all; with 0/1 asked for explicitly it must be off.
        enable_idempotence=acks == "all",
        bootstrap_timeout_ms=timeout_ms,
        request_timeout_ms=timeout_ms,
        delivery_timeout_ms=timeout_ms,
        max_block_ms=timeout_ms,
        max_request_size=MAX_RECORD_BYTES,
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
    if request.headers or request.traceparent is not None:
        headers = _with_job_headers(headers, request)
    headers.append((EXECUTION_HEADER, request.execution_id.encode()))
    headers.append((ATTEMPT_HEADER, str(request.attempt).encode()))
    # The value is JSON whatever the template resolved to: "{{input.name}}" sends "\"a\"".
    value = json.dumps(spec.get("value_template"), separators=(",", ":")).encode("utf-8")
    signed = webhook_headers(request.signing, request.execution_id, value)
    if signed:  # ours replace same-named spec headers: receivers verify them
        headers = [(k, v) for k, v in headers if k.lower() not in signed]
        headers += [(k, v.encode()) for k, v in signed.items()]
    return {"key": None if key is None else _as_bytes(key), "value": value, "headers": headers}


def _with_job_headers(
    headers: list[tuple[str, bytes]], request: DeliveryRequest
) -> list[tuple[str, bytes]]:
    """The endpoint's record headers, then the job's own and the attempt's trace context,
    which replace the endpoint's of the same name (in any case)."""
    own = [(name, value.encode()) for name, value in (request.headers or {}).items()]
    if request.traceparent is not None:
        own.append(("traceparent", request.traceparent.encode()))
        if request.tracestate is not None:
            own.append(("tracestate", request.tracestate.encode()))
    replaced = {name.lower() for name, _ in own}
    return [(k, v) for k, v in headers if k.lower() not in replaced] + own
