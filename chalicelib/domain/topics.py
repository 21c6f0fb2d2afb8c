"""Fan-out topics, pure: a topic's definition and a ``POST /jobs`` that names one.

A topic is a name and the endpoints it fans out to (``POST /topics {"name", "endpoints"}``).
``POST /jobs`` with ``"topic"`` instead of ``"endpoint"`` is one job request expanded into
one job per endpoint of the topic (:func:`fan_out`), each carrying every per-job field of
the request. Decisions recorded here (and in docs/reference/topics.md):

* A topic is named as an endpoint is (:data:`chalicelib.domain.names.ENDPOINT_NAME`) and
  names 1 to :data:`MAX_TOPIC_ENDPOINTS` distinct endpoints, in the order it lists them
  (the order its jobs are answered in).
* ``topic`` and ``endpoint`` exclude each other; ``url`` is refused with a topic (each
  endpoint delivers to its own target and checks its own ``allowed_url_prefixes``).
* The request's idempotency key deduplicates per topic: each job of the fan-out holds
  :func:`topic_key` (``topic:<topic>:<key>``) on its own endpoint, so the unique key of
  (endpoint, idempotency_key) makes a repeat find the jobs of the first request. Client keys
  starting with ``topic:`` are the service's (:data:`chalicelib.domain.jobs.TOPIC_KEY_PREFIX`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from chalicelib.domain.jobs import (
    MAX_IDEMPOTENCY_KEY_LENGTH,
    TOPIC_KEY_PREFIX,
    JobRequest,
    parse_job_request,
)
from chalicelib.domain.names import ENDPOINT_NAME, MAX_NAME_LENGTH, check_endpoint_name
from chalicelib.domain.trace_context import TraceContext
from chalicelib.errors import ValidationFailed

#: Most endpoints one topic names: the most jobs one fan-out creates.
MAX_TOPIC_ENDPOINTS = 100


def check_topic_name(name: object, field: str = "name") -> str:
    """``name`` if it is a valid topic name (the endpoint rule), else 400 naming ``field``."""
    return check_endpoint_name(name, field)


def parse_topic_endpoints(value: object) -> list[str]:
    """A topic's ``endpoints``: 1 to MAX_TOPIC_ENDPOINTS distinct endpoint names (400
    naming the field otherwise). Whether they exist is the service's check."""
    if not isinstance(value, list) or not value:
        raise ValidationFailed("Field 'endpoints' must be a non-empty array of endpoint names.")
    if len(value) > MAX_TOPIC_ENDPOINTS:
        raise ValidationFailed(
            f"Field 'endpoints' holds at most {MAX_TOPIC_ENDPOINTS} endpoints; got {len(value)}."
        )
    seen: set[str] = set()
    for index, name in enumerate(value):
        if not isinstance(name, str) or len(name) > MAX_NAME_LENGTH:
            raise ValidationFailed(f"Field 'endpoints' item {index} must be an endpoint name.")
        if not ENDPOINT_NAME.fullmatch(name):
            raise ValidationFailed(
                f"Field 'endpoints' item {index} is not an endpoint name: {name!r}."
            )
        if name in seen:
            raise ValidationFailed(f"Field 'endpoints' names endpoint '{name}' more than once.")
        seen.add(name)
    return list(value)


def topic_key(topic: str, key: str) -> str:
    """The idempotency key each job of a fan-out holds on its endpoint."""
    return f"{TOPIC_KEY_PREFIX}{topic}:{key}"


def parse_topic_job(
    body: Mapping[str, Any], *, now: datetime, trace: TraceContext | None = None
) -> tuple[str, JobRequest]:
    """A ``POST /jobs`` body naming a ``topic``: the topic and the job request every
    endpoint of it gets (its ``endpoint`` is a placeholder until :func:`fan_out`)."""
    topic = check_topic_name(body.get("topic"), "topic")
    if "endpoint" in body:
        raise ValidationFailed("Fields 'endpoint' and 'topic' exclude each other: give one.")
    if "url" in body:
        raise ValidationFailed(
            "Field 'url' cannot be given with 'topic': each endpoint of a topic delivers to "
            "its own target."
        )
    fields = {name: value for name, value in body.items() if name != "topic"}
    request = parse_job_request({**fields, "endpoint": topic}, now=now, trace=trace)
    key = request.idempotency_key
    if key is not None:
        room = MAX_IDEMPOTENCY_KEY_LENGTH - len(topic_key(topic, ""))
        if len(key) > room:
            raise ValidationFailed(
                f"Field 'idempotency_key' is longer than {room} characters, the most a key "
                f"may have with topic '{topic}'."
            )
        request = replace(request, idempotency_key=topic_key(topic, key))
    return topic, request


def fan_out(request: JobRequest, endpoints: Sequence[str]) -> list[JobRequest]:
    """One job request per endpoint, in the topic's order."""
    return [replace(request, endpoint=name) for name in endpoints]
