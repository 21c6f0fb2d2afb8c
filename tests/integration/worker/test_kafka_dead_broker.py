"""A dead Kafka broker must not stall every delivery thread for timeout_ms each.

Real kafka-python against a closed loopback port: the first connect fails after its
timeout, the threads that were waiting for the same brokers and the deliveries right after
fail fast from the remembered failure, and only one connect is attempted.
"""

from __future__ import annotations

import threading

import pytest

from chalicelib.domain.delivery import DeliveryErrorType, DeliveryRequest
from chalicelib.worker.dispatchers import kafka as kafka_dispatcher
from tests.support.served import free_port


def test_concurrent_deliveries_to_a_dead_broker_share_one_connect(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    connects: list[tuple[list[str], str, int]] = []
    real_new_producer = kafka_dispatcher._new_producer

    def counting(servers: list[str], acks: str, timeout_ms: int, **options: object) -> object:
        connects.append((servers, acks, timeout_ms))
        return real_new_producer(servers, acks, timeout_ms, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(kafka_dispatcher, "_new_producer", counting)
    dispatcher = kafka_dispatcher.KafkaDispatcher(allow_private=True)
    spec = {
        "bootstrap_servers": f"127.0.0.1:{free_port()}",
        "topic": "t",
        "acks": "all",
        "timeout_ms": 1000,
        "value_template": {},
    }
    outcomes: list[object] = []
    lock = threading.Lock()

    def deliver(n: int) -> None:
        outcome = dispatcher.dispatch(
            DeliveryRequest(execution_id=f"exec_{n}", attempt=1, spec=spec)
        )
        with lock:
            outcomes.append(outcome)

    threads = [threading.Thread(target=deliver, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    dispatcher.close()
    assert len(outcomes) == 8
    assert {o.error["type"] for o in outcomes} == {DeliveryErrorType.BROKER_ERROR}  # type: ignore[attr-defined]
    assert len(connects) == 1
