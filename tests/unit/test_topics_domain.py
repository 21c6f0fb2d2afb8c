"""Topics, pure: a topic's endpoint list, and a POST /jobs body naming a topic expanded into
one job request per endpoint."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from chalicelib.domain.batches import parse_batch_request
from chalicelib.domain.topics import fan_out, parse_topic_endpoints, parse_topic_job
from chalicelib.errors import ValidationFailed

NOW = datetime(2026, 3, 15, 10, 0, tzinfo=UTC)


def test_the_list_keeps_its_order_and_its_bounds() -> None:
    assert parse_topic_endpoints(["b", "a"]) == ["b", "a"]
    assert len(parse_topic_endpoints([f"e{i}" for i in range(100)])) == 100
    with pytest.raises(ValidationFailed, match="at most 100"):
        parse_topic_endpoints([f"e{i}" for i in range(101)])
    with pytest.raises(ValidationFailed, match="more than once"):
        parse_topic_endpoints(["a", "a"])


def test_a_topic_body_is_one_request_per_endpoint_under_the_topics_key() -> None:
    body = {
        "topic": "orders",
        "trigger": "DELAYED",
        "delay": "90s",
        "idempotency_key": "k",
        "input": {"n": 1},
        "timeout_ms": 500,
    }
    topic, request = parse_topic_job(body, now=NOW)
    assert topic == "orders" and request.idempotency_key == "topic:orders:k"
    jobs = fan_out(request, ["a", "b"])
    assert [j.endpoint for j in jobs] == ["a", "b"]
    assert {j.run_at for j in jobs} == {datetime(2026, 3, 15, 10, 1, 30, tzinfo=UTC)}
    assert all(j.delivery_overrides == {"timeout_ms": 500} for j in jobs)


def test_a_key_leaves_room_for_the_topics_prefix() -> None:
    body = {"topic": "orders", "trigger": "IMMEDIATE"}
    parse_topic_job({**body, "idempotency_key": "k" * 242}, now=NOW)
    with pytest.raises(ValidationFailed, match="longer than 242 characters"):
        parse_topic_job({**body, "idempotency_key": "k" * 243}, now=NOW)


def test_a_batch_names_the_item_that_carries_a_topic() -> None:
    jobs = [{"endpoint": "a"}, {"topic": "t"}]
    with pytest.raises(ValidationFailed, match=r"^Item 1 of 'jobs': field 'topic'"):
        parse_batch_request({"jobs": jobs})
