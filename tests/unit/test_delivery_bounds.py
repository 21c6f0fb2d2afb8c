"""A rendered request stops at its size limit while it renders; what a target answers is
parsed without raising and recorded whatever bytes it holds."""

from __future__ import annotations

import json
import tracemalloc
from datetime import UTC, datetime
from typing import Any

import pytest

from chalicelib.domain.backoff import parse_retry_after
from chalicelib.domain.delivery import (
    MAX_REQUEST_BYTES,
    DeliveryErrorType,
    failed,
    storable,
    succeeded,
)
from chalicelib.domain.templates import RenderTooLarge, Template, TemplateContext
from chalicelib.worker.dispatchers.http1 import ProtocolError, ResponseParser

MB = 1024 * 1024
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_the_renderer_stops_at_the_limit_without_building_the_output() -> None:
    """500 copies of a 1 MB value would be 500 MB: the renderer refuses after about four,
    and what it allocated stays near the limit (a memory bound, not a timing)."""
    context = TemplateContext(input={"b": "x" * MB}, config={}, secret={})
    template = Template({"url": "http://t/", "body_template": ["{{input.b}}"] * 500})
    interpolated = Template({"body_template": "<" + "{{input.b}},{{input}}" * 250 + ">"})

    for each in (template, interpolated):
        tracemalloc.start()
        try:
            with pytest.raises(RenderTooLarge) as raised:
                each.resolve(context, limit=MAX_REQUEST_BYTES)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert raised.value.limit == MAX_REQUEST_BYTES
        assert peak < 8 * MB  # the would-be output is 500 MB


CONTEXT = TemplateContext(
    input={"b": 'q"\\\n\u00e9\U0001d11e' * 7, "n": [1, 2.5, {"a": '"'}], "s": "plain", "t": True},
    config={"c": "\u00fc"},
    secret={"k": "sk-1"},
)
TEMPLATES: list[Any] = [
    {
        "url": "http://a/{{input.s}}?c={{config.c}}",
        "headers": {"Authorization": "Bearer {{secret.k}}", "{{input.s}}": "{{input.n}}"},
        "body_template": {"x": "{{input.b}}", "y": ["{{input.n}}", "lit", 3, None]},
        "z": 'pre " {{input.n}} mid {{input.b}} {{input.t}}',
    },
    "{{input}}",
    ["{{input.s}}"],
    {"only": "literal", "list": [1, {"a": []}]},
    "a{{input.n}}b",
    # a key that is one placeholder becomes text: an object's JSON, escaped once more
    {"{{input.n}}": 1, "{{ input.b }}": "{{input.b}}"},
]


@pytest.mark.parametrize("source", TEMPLATES)
def test_the_count_is_the_compact_json_size_of_the_result(source: Any) -> None:
    template = Template(source)
    whole = template.resolve(CONTEXT)
    size = len(json.dumps(whole, separators=(",", ":")))

    assert template.resolve(CONTEXT, limit=size) == whole
    with pytest.raises(RenderTooLarge):
        template.resolve(CONTEXT, limit=size - 1)


def test_storable_replaces_what_the_database_refuses() -> None:
    assert storable("a\x00b\ud800c\udfffd") == "a\ufffdb\ufffdc\ufffdd"
    assert storable("plain \u00e9 \U0001d11e") == "plain \u00e9 \U0001d11e"


def test_recorded_outcomes_are_storable_everywhere() -> None:
    ok = succeeded({"status_code": 200, "body": "a\x00b", "stream": "s\x00"}).redacted([])
    assert ok.output == {"status_code": 200, "body": "a\ufffdb", "stream": "s\ufffd"}
    bad = failed(DeliveryErrorType.HTTP_ERROR, "x\x00\ud800", detail=["\x00"]).redacted([])
    assert bad.error == {"type": "HTTP_ERROR", "detail": ["\ufffd"], "message": "x\ufffd\ufffd"}


@pytest.mark.parametrize(
    "value",
    [
        "\u00b2",
        "1\u00b2",
        "\u0661",
        "soon",
        "-5",
        "",
        # dates whose year or zone offset passes what datetime's C fields hold
        "Mon, 01 Jan 99999999999999999999 00:00:00 GMT",
        "Mon, 01 Jan 2026 00:00:00 +99999999999999999999999",
        "Mon, 01 Jan 2026 00:00:00 -9999",
    ],
)
def test_a_malformed_retry_after_is_ignored(value: str) -> None:
    assert parse_retry_after(value, NOW) is None


def test_a_retry_after_of_thousands_of_digits_reads_as_the_longest() -> None:
    assert parse_retry_after("1" * 5000, NOW) == 999_999_999_000
    assert parse_retry_after("0" * 5000 + "7", NOW) == 7000
    assert parse_retry_after(" 120 ", NOW) == 120_000


@pytest.mark.parametrize("length", ["1" * 5000, "\u00b2", "5, 6", "1" * 19])
def test_a_malformed_content_length_is_a_protocol_error(length: str) -> None:
    parser = ResponseParser(head_only=False, body_limit=100)
    head = f"HTTP/1.1 200 OK\r\nContent-Length: {length}\r\n\r\n".encode("latin-1")
    with pytest.raises(ProtocolError):
        parser.feed(bytearray(head))


class _RefusingProducer:
    """A producer whose broker refuses the record's size (``message.max.bytes``)."""

    def send(self, topic: str, **record: Any) -> Any:
        from kafka.errors import MessageSizeTooLargeError

        raise MessageSizeTooLargeError("MESSAGE_TOO_LARGE")


def test_a_record_the_broker_refuses_for_its_size_fails_without_retry() -> None:
    from chalicelib.domain.delivery import DeliveryRequest
    from chalicelib.worker.dispatchers.kafka import KafkaDispatcher

    class Refused(KafkaDispatcher):
        def _new_producer(self, servers: str, acks: str, timeout_ms: int) -> Any:
            return _RefusingProducer()

    spec = {"bootstrap_servers": "127.0.0.1:9", "topic": "t", "value_template": {"b": "x"}}
    outcome = Refused(allow_private=True).dispatch(
        DeliveryRequest(execution_id="e", attempt=1, spec=spec)
    )

    assert outcome.error_type == DeliveryErrorType.REQUEST_TOO_LARGE
    assert outcome.retryable is False
