"""Bodies that are not JSON objects, through the real API and worker to real targets on
loopback: inputs that are any JSON value, and form, XML and text bodies."""

from __future__ import annotations

import json
import uuid
from typing import Any
from urllib.parse import parse_qs
from xml.etree import ElementTree

import redis

from chalicelib.db.connection import Database
from tests.integration.worker.test_payloads import http, only, run_job
from tests.support.api_client import ApiClient
from tests.support.factories import endpoint_body, register_endpoint
from tests.support.seed.worker import execution
from tests.support.served import HttpTarget, kafka_messages

HOSTILE = {"name": "Ada & <Bob>", "note": "a \"q\" 'x' =&+% é\n", "n": 42}
VALUES: list[Any] = [[1, "two", {"three": 3}], "plain text", 7, 0, ""]


def test_any_json_input_is_sent_as_that_json(
    api: ApiClient, database: Database, make_worker: Any, http_target: HttpTarget
) -> None:
    register_endpoint(api, "values", spec=http(http_target, "values"))
    worker = make_worker()

    for value in VALUES:
        execution_id = run_job(api, database, worker, "values", input=value)
        assert execution(database, execution_id)["input"] == value

    sent = http_target.received("/values")
    assert [json.loads(r.body) for r in sent] == VALUES
    assert all(r.headers["content-type"] == "application/json" for r in sent)


def test_any_json_input_over_kafka_and_redis(
    api: ApiClient, database: Database, make_worker: Any, kafka_bootstrap: str, redis_url: str
) -> None:

    topic, stream = "values-" + uuid.uuid4().hex[:8], "values-" + uuid.uuid4().hex[:8]
    kafka = {"bootstrap_servers": kafka_bootstrap, "topic": topic, "timeout_ms": 5000}
    register_endpoint(api, "kafka-values", endpoint_type="KAFKA", spec=kafka)
    register_endpoint(
        api,
        "redis-values",
        endpoint_type="REDIS_STREAM",
        spec={"redis_url": redis_url, "stream": stream},
    )
    worker = make_worker()
    for value in VALUES[:3]:
        run_job(api, database, worker, "kafka-values", input=value)
        run_job(api, database, worker, "redis-values", input=value)

    values = [json.loads(m.value) for m in kafka_messages(kafka_bootstrap, topic, 3)]
    assert sorted(values, key=json.dumps) == sorted(VALUES[:3], key=json.dumps)
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    try:
        entries = client.xrange(stream)
    finally:
        client.close()
    # A stream field is text: a string input is that string, any other value its JSON.
    assert [fields["input"] for _, fields in entries] == [
        json.dumps(VALUES[0], separators=(",", ":")),
        "plain text",
        "7",
    ]


def test_form_xml_and_text_bodies_are_encoded_for_their_type(
    api: ApiClient, database: Database, make_worker: Any, http_target: HttpTarget
) -> None:
    bodies = {
        "form": (
            "application/x-www-form-urlencoded",
            "name={{input.name}}&note={{input.note}}&n={{input.n}}",
        ),
        "xml": (
            "application/xml; charset=utf-8",
            '<o note="{{input.note}}"><name>{{input.name}}</name></o>',
        ),
        "text": ("text/plain", "Dear {{input.name}},\n{{input.note}}"),
    }
    for name, (content_type, template) in bodies.items():
        spec = http(
            http_target, name, headers={"Content-Type": content_type}, body_template=template
        )
        register_endpoint(api, name, spec=spec)
    worker = make_worker()

    for name in bodies:
        run_job(api, database, worker, name, input=HOSTILE)

    form = only(http_target, "form")
    assert form.headers["content-type"] == "application/x-www-form-urlencoded"
    assert parse_qs(form.body.decode(), strict_parsing=True) == {
        "name": [HOSTILE["name"]],
        "note": [HOSTILE["note"]],
        "n": ["42"],
    }
    xml = ElementTree.fromstring(only(http_target, "xml").body)  # noqa: S314 (our own body)
    assert (xml.get("note"), xml.find("name").text) == (  # type: ignore[union-attr]
        HOSTILE["note"].replace("\n", " "),  # an attribute's line break reads as a space
        HOSTILE["name"],
    )
    text = only(http_target, "text")
    assert text.body.decode() == f"Dear {HOSTILE['name']},\n{HOSTILE['note']}"
    assert text.headers["content-type"] == "text/plain"


def test_a_text_template_on_a_json_endpoint_is_refused(api: ApiClient) -> None:
    for headers in ({}, {"Content-Type": "application/json"}):
        spec = {
            "url": "http://127.0.0.1:9/x",
            "method": "POST",
            "headers": headers,
            "body_template": "a={{input.a}}",
        }
        reply = api.post("/endpoints", endpoint_body("json-text", spec=spec))
        assert reply.status == 400, reply.body
        assert reply.body["error"]["code"] == "INVALID_REQUEST"
        message = reply.body["error"]["message"]
        assert (
            "Field 'spec.body_template' must be an object, or a string that is exactly" in message
        )
        assert "application/x-www-form-urlencoded, text/* or XML" in message
