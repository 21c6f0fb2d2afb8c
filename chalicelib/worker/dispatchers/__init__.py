"""Dispatchers: one per endpoint type, each turning a resolved spec into a delivery.

Every dispatcher returns a :class:`~chalicelib.domain.delivery.DeliveryOutcome` and never
lets a library exception escape: conversion to the spec's error shapes happens at this edge.
The Kafka and Redis modules import their client libraries on first use.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Protocol

from chalicelib.domain.delivery import DeliveryOutcome, DeliveryRequest
from chalicelib.domain.statuses import EndpointType


class Dispatcher(Protocol):
    """Delivers one attempt over one transport."""

    def dispatch(self, request: DeliveryRequest) -> DeliveryOutcome: ...

    def close(self) -> None: ...


def default_dispatchers(
    *, allow_private: bool, pool_maxsize: int, clock: Callable[[], datetime]
) -> Mapping[str, Dispatcher]:
    """The three real dispatchers, sharing nothing but the process and the address policy."""
    from chalicelib.worker.dispatchers.http import HttpDispatcher
    from chalicelib.worker.dispatchers.kafka import KafkaDispatcher
    from chalicelib.worker.dispatchers.redis_stream import RedisStreamDispatcher

    return {
        EndpointType.HTTP: HttpDispatcher(
            allow_private=allow_private, pool_maxsize=pool_maxsize, clock=clock
        ),
        EndpointType.KAFKA: KafkaDispatcher(allow_private=allow_private),
        EndpointType.REDIS_STREAM: RedisStreamDispatcher(allow_private=allow_private),
    }
