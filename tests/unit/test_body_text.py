"""Bodies that are not JSON objects: any JSON input as is, and text bodies encoded for
their Content-Type (pure: endpoint validation and template rendering)."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs
from xml.etree import ElementTree

import pytest

from chalicelib.domain.body_text import text_encoder
from chalicelib.domain.endpoints import validate_spec
from chalicelib.domain.templates import RenderTooLarge, Template, TemplateContext
from chalicelib.errors import ValidationFailed

HOSTILE = {"name": "Ada & <Bob>", "note": "a \"quoted\" 'x' =&+% é", "n": 42}


def spec(content_type: str | None, body: Any) -> dict[str, Any]:
    headers = {} if content_type is None else {"content-TYPE": content_type}
    return {
        "url": "https://hooks.example.com/x",
        "method": "POST",
        "headers": headers,
        "body_template": body,
    }


def render(s: dict[str, Any], value: Any, *, limit: int | None = None) -> Any:
    template = Template(s, text_body=text_encoder(s))
    context = TemplateContext(input=value, config={}, secret={})
    return template, template.resolve(context, limit=limit)["body_template"]


def test_form_values_are_percent_encoded() -> None:
    s = validate_spec(
        "HTTP",
        spec(
            "application/x-www-form-urlencoded; charset=utf-8",
            "name={{input.name}}&note={{input.note}}&n={{input.n}}",
        ),
    )
    template, body = render(s, HOSTILE)
    assert template.text_body
    assert parse_qs(body, strict_parsing=True) == {
        "name": [HOSTILE["name"]],
        "note": [HOSTILE["note"]],
        "n": ["42"],
    }


def test_xml_values_are_escaped() -> None:
    s = validate_spec(
        "HTTP",
        spec("application/xml", '<order n="{{input.note}}"><name>{{input.name}}</name></order>'),
    )
    _, body = render(s, HOSTILE)
    root = ElementTree.fromstring(body)  # noqa: S314 (our own body)
    assert root.get("n") == HOSTILE["note"]
    assert root.find("name").text == HOSTILE["name"]  # type: ignore[union-attr]
    for xml_type in ("text/xml", "application/soap+xml"):
        assert text_encoder(spec(xml_type, "<a>{{input.n}}</a>")) is not None


def test_text_values_are_as_is_and_non_strings_compact_json() -> None:
    s = validate_spec(
        "HTTP", spec("text/plain", "Hello {{input.name}}: {{input.list}} {{input.note}}")
    )
    _, body = render(s, {**HOSTILE, "list": [1, {"a": 2}]})
    assert body == f'Hello {HOSTILE["name"]}: [1,{{"a":2}}] {HOSTILE["note"]}'
    # One placeholder alone is text too (a raw string, not a JSON string).
    _, alone = render(spec("text/plain", "{{input.name}}"), HOSTILE)
    assert alone == HOSTILE["name"]


def test_input_alone_stays_json_for_every_type() -> None:
    s = spec("text/plain", "{{input}}")
    assert text_encoder(s) is None
    _, body = render(s, ["a", 1])
    assert body == ["a", 1]


@pytest.mark.parametrize("content_type", [None, "application/json", "{{config.type}}", "image/png"])
def test_a_text_template_without_a_text_content_type_is_400(content_type: str | None) -> None:
    with pytest.raises(ValidationFailed) as info:
        validate_spec("HTTP", spec(content_type, "a={{input.a}}"))
    assert info.value.status == 400
    assert "Field 'spec.body_template' must be an object, or a string that is exactly one" in (
        info.value.message
    )
    assert "application/x-www-form-urlencoded, text/* or XML" in info.value.message


def test_kafka_value_template_is_still_json_only() -> None:
    kafka = {"bootstrap_servers": "127.0.0.1:9092", "topic": "t", "value_template": "a={{input.a}}"}
    with pytest.raises(ValidationFailed, match=r"spec\.value_template.*exactly one placeholder"):
        validate_spec("KAFKA", kafka)


def test_a_text_body_keeps_the_render_limit() -> None:
    s = spec("application/x-www-form-urlencoded", "a=" + "{{input.v}}" * 200)
    # Each value triples when percent-encoded: 200 x 3 KiB would be 600 KiB.
    with pytest.raises(RenderTooLarge):
        render(s, {"v": "/" * 1024}, limit=100_000)
    _, body = render(s, {"v": "/"}, limit=100_000)
    assert body == "a=" + "%2F" * 200


@pytest.mark.parametrize("value", [[1, 2], "text", 0, "", False, 3.5, {"a": 1}])
def test_any_json_input_is_the_whole_input(value: Any) -> None:
    s = {"url": "https://x.test/", "method": "POST", "body_template": "{{input}}"}
    context = TemplateContext(input=value, config={}, secret={})
    assert Template(s).resolve(context)["body_template"] == value
    none = TemplateContext(input={}, config={}, secret={})
    assert Template(s).resolve(none)["body_template"] is None
