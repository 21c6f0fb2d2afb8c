"""Pure validation of endpoint registrations, names, payload specs and timestamps."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from chalicelib.domain.endpoints import (
    RETRY_DEFAULTS,
    SPEC_RULES,
    apply_spec_defaults,
    endpoint_snapshot,
    parse_endpoint,
    validate_retry_policy,
)
from chalicelib.domain.names import check_endpoint_name, check_setup_name
from chalicelib.domain.payload_specs import check_schema
from chalicelib.domain.timefmt import iso
from chalicelib.errors import InvalidSchema, TemplateResolutionFailed, ValidationFailed


def body(endpoint_type: str = "HTTP", spec: dict[str, Any] | None = None, **extra: Any) -> dict:
    specs = {
        "HTTP": {"url": "https://x.example", "method": "POST"},
        "KAFKA": {"bootstrap_servers": "k:9092", "topic": "t", "value_template": {"a": 1}},
        "REDIS_STREAM": {"redis_url": "redis://r", "stream": "s", "fields_template": {"a": "b"}},
    }
    return {"name": "ep", "type": endpoint_type, "spec": spec or specs[endpoint_type], **extra}


@pytest.mark.parametrize(
    ("endpoint_type", "defaults"),
    [
        ("HTTP", {"timeout_ms": 30000, "expected_status_codes": [200, 201, 202, 204]}),
        ("KAFKA", {"acks": "all", "timeout_ms": 10000}),
        ("REDIS_STREAM", {"approximate_trimming": True, "timeout_ms": 3000}),
    ],
)
def test_defaults_per_type(endpoint_type: str, defaults: dict[str, Any]) -> None:
    definition = parse_endpoint(body(endpoint_type))
    for key, value in defaults.items():
        assert definition.spec[key] == value
    assert definition.retry_policy == RETRY_DEFAULTS
    assert definition.config is None and definition.payload_spec is None


def test_defaults_are_fresh_copies() -> None:
    first = parse_endpoint(body("HTTP"))
    first.spec["expected_status_codes"].append(500)
    assert SPEC_RULES["HTTP"]["expected_status_codes"].default == [200, 201, 202, 204]


def test_explicit_values_are_kept() -> None:
    spec = {"url": "https://x", "method": "GET", "timeout_ms": 5, "expected_status_codes": [418]}
    definition = parse_endpoint(body("HTTP", spec))
    assert definition.spec["timeout_ms"] == 5
    assert definition.spec["expected_status_codes"] == [418]


@pytest.mark.parametrize(
    ("endpoint_type", "spec_change"),
    [
        ("HTTP", {"method": "get"}),
        ("HTTP", {"url": ""}),
        ("HTTP", {"url": None, "method": "GET"}),
        ("HTTP", {"expected_status_codes": [200, 200]}),
        ("HTTP", {"expected_status_codes": [True]}),
        ("HTTP", {"timeout_ms": 300001}),
        ("HTTP", {"max_concurrent": 0}),
        ("KAFKA", {"max_concurrent": "5"}),
        ("REDIS_STREAM", {"max_concurrent": 10_001}),
        ("KAFKA", {"acks": 1}),
        ("KAFKA", {"acks": "2"}),
        ("KAFKA", {"key_template": {"a": 1}}),
        ("KAFKA", {"value_template": "text"}),
        ("REDIS_STREAM", {"max_len": 0}),
        ("REDIS_STREAM", {"max_len": "100"}),
        ("REDIS_STREAM", {"max_len": "{{config.a}} and more"}),
        ("REDIS_STREAM", {"approximate_trimming": "yes"}),
        ("REDIS_STREAM", {"fields_template": {}}),
    ],
)
def test_bad_spec_values_are_400(endpoint_type: str, spec_change: dict[str, Any]) -> None:
    spec = {**body(endpoint_type)["spec"], **spec_change}
    spec = {k: v for k, v in spec.items() if v is not None}
    with pytest.raises(ValidationFailed):
        parse_endpoint(body(endpoint_type, spec, config="c"))


@pytest.mark.parametrize("endpoint_type", ["HTTP", "KAFKA", "REDIS_STREAM"])
def test_max_concurrent_is_optional_and_kept(endpoint_type: str) -> None:
    assert "max_concurrent" not in parse_endpoint(body(endpoint_type, config="c")).spec
    spec = {**body(endpoint_type)["spec"], "max_concurrent": 3}
    assert parse_endpoint(body(endpoint_type, spec, config="c")).spec["max_concurrent"] == 3


def test_missing_required_spec_fields_are_listed() -> None:
    with pytest.raises(ValidationFailed, match="topic, value_template"):
        parse_endpoint(body("KAFKA", {"bootstrap_servers": "k"}))


def test_max_len_may_be_a_config_placeholder() -> None:
    spec = {**body("REDIS_STREAM")["spec"], "max_len": "{{config.max_stream_length}}"}
    definition = parse_endpoint(body("REDIS_STREAM", spec, config="c"))
    assert definition.spec["max_len"] == "{{config.max_stream_length}}"
    spec["max_len"] = "{{input.n}}"
    with pytest.raises(TemplateResolutionFailed, match=r"spec\.max_len"):
        parse_endpoint(body("REDIS_STREAM", spec, config="c"))


NAMESPACE_CASES = [
    ("HTTP", "url", "{{input.x}}", False),
    ("HTTP", "url", "{{config.x}}/{{secret.s}}", True),
    ("HTTP", "headers", {"A": "{{input.x}}"}, False),
    ("HTTP", "headers", {"{{secret.s}}": "v"}, True),
    ("HTTP", "body_template", {"a": ["{{input.x}}", "{{config.y}}", "{{secret.s}}"]}, True),
    ("KAFKA", "bootstrap_servers", "{{secret.s}}", True),
    ("KAFKA", "topic", "{{secret.s}}", False),
    ("KAFKA", "topic", "{{input.t}}", False),
    ("KAFKA", "key_template", "{{input.k}}-{{config.c}}", True),
    ("KAFKA", "key_template", "{{secret.s}}", False),
    ("KAFKA", "headers", {"ce-type": "order.{{input.event_type}}"}, True),
    ("REDIS_STREAM", "stream", "{{config.s}}", True),
    ("REDIS_STREAM", "stream", "{{input.s}}", False),
    ("REDIS_STREAM", "redis_url", "{{secret.s}}", True),
    ("REDIS_STREAM", "fields_template", {"a": "{{input.a}}", "b": "{{secret.s}}"}, True),
    ("HTTP", "body_template", {"a": "{{env.PATH}}"}, False),
]


@pytest.mark.parametrize(("endpoint_type", "field", "value", "allowed"), NAMESPACE_CASES)
def test_template_namespaces_per_field(
    endpoint_type: str, field: str, value: Any, allowed: bool
) -> None:
    spec = {**body(endpoint_type)["spec"], field: value}
    candidate = body(endpoint_type, spec, config="c")
    if allowed:
        parse_endpoint(candidate)
    else:
        with pytest.raises(TemplateResolutionFailed, match=f"spec.{field}"):
            parse_endpoint(candidate)


def test_secret_names_are_collected_and_nested_secret_paths_rejected() -> None:
    spec = {
        "url": "{{secret.base}}",
        "method": "POST",
        "headers": {"A": "{{ secret.token }}"},
        "body_template": {"k": "{{secret.token}}"},
    }
    assert parse_endpoint(body("HTTP", spec)).secrets == {"base", "token"}
    spec["url"] = "{{secret.base.inner}}"
    with pytest.raises(TemplateResolutionFailed, match="names one secret"):
        parse_endpoint(body("HTTP", spec))


def test_config_placeholder_needs_a_config() -> None:
    spec = {"url": "{{config.base}}", "method": "GET"}
    with pytest.raises(TemplateResolutionFailed, match="no 'config'"):
        parse_endpoint(body("HTTP", spec))
    assert parse_endpoint(body("HTTP", spec, config="svc")).config == "svc"


def test_text_without_placeholders_is_literal() -> None:
    spec = {"url": "https://x/{{not a placeholder}}", "method": "GET"}
    assert parse_endpoint(body("HTTP", spec)).secrets == frozenset()


@pytest.mark.parametrize(
    ("policy", "ok"),
    [
        ({}, True),
        ({"max_attempts": 100, "backoff": "fixed", "initial_delay_ms": 0, "max_delay_ms": 0}, True),
        ({"backoff": "linear", "initial_delay_ms": 60000}, True),
        ({"initial_delay_ms": 60001}, False),
        ({"max_attempts": 1.5}, False),
        ({"max_delay_ms": 86_400_001}, False),
        ({"backoff": None}, True),
    ],
)
def test_retry_policy_ranges(policy: dict[str, Any], ok: bool) -> None:
    if ok:
        result = validate_retry_policy(policy)
        assert set(result) == set(RETRY_DEFAULTS)
    else:
        with pytest.raises(ValidationFailed):
            validate_retry_policy(policy)


def test_put_takes_the_name_from_the_path() -> None:
    candidate = body("HTTP")
    del candidate["name"]
    assert parse_endpoint(candidate, path_name="from-path").name == "from-path"
    with pytest.raises(ValidationFailed, match="cannot change"):
        parse_endpoint({**candidate, "name": "other"}, path_name="from-path")
    with pytest.raises(ValidationFailed, match="Missing required field"):
        parse_endpoint({"type": "HTTP"}, path_name="from-path")


def test_snapshot_follows_the_shared_contract() -> None:
    row = {
        "name": "ep",
        "endpoint_type": "KAFKA",
        "spec": {"bootstrap_servers": "k", "topic": "t", "value_template": {}},
        "retry_policy": None,
        "config_ref": None,
        "payload_spec_ref": "in",
        "created_at": datetime.now(UTC),
    }
    snapshot = endpoint_snapshot(row)
    assert set(snapshot) == {
        "name",
        "type",
        "spec",
        "retry_policy",
        "config_ref",
        "payload_spec_ref",
    }
    assert snapshot["spec"]["acks"] == "all" and snapshot["spec"]["timeout_ms"] == 10000
    assert snapshot["retry_policy"] == RETRY_DEFAULTS
    assert apply_spec_defaults("KAFKA", {"acks": None}) == {"acks": "all", "timeout_ms": 10000}


@pytest.mark.parametrize("name", ["a", "send-welcome-email", "v2-api", "x" * 100])
def test_valid_endpoint_names(name: str) -> None:
    assert check_endpoint_name(name) == name


@pytest.mark.parametrize(
    "name", ["", "-a", "a-", "a--b", "A", "a_b", "a b", "a/b", "é", "x" * 101, 5, None]
)
def test_invalid_endpoint_names(name: Any) -> None:
    with pytest.raises(ValidationFailed):
        check_endpoint_name(name)


def test_setup_names_also_allow_underscores() -> None:
    assert check_setup_name("email_api_key") == "email_api_key"
    for bad in ("_x", "-x", "A", "a.b", "a b", "x" * 101):
        with pytest.raises(ValidationFailed):
            check_setup_name(bad)


def test_check_schema() -> None:
    assert check_schema({"type": "object"}) == {"type": "object"}
    with pytest.raises(ValidationFailed):
        check_schema(["type"])
    with pytest.raises(InvalidSchema, match="properties/x/type"):
        check_schema({"properties": {"x": {"type": 3}}})
    with pytest.raises(InvalidSchema, match="Unknown meta-schema"):
        check_schema({"$schema": "urn:nope"})


def test_iso_is_utc_with_z() -> None:
    assert iso(datetime(2026, 3, 15, 10, 0, tzinfo=UTC)) == "2026-03-15T10:00:00Z"
    ist = timezone(timedelta(hours=5, minutes=30))
    assert iso(datetime(2026, 3, 15, 15, 30, 0, 5, tzinfo=ist)) == "2026-03-15T10:00:00.000005Z"
    assert iso(None) is None
    with pytest.raises(ValueError, match="naive"):
        iso(datetime(2026, 3, 15))


def test_one_function_builds_the_endpoint_snapshot() -> None:
    # Two implementations had drifted apart (one kept a null retry field, one failed on a
    # NULL spec); the contract with the worker has one source of truth, in the domain.
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "chalicelib"
    defined = [
        f"{path.relative_to(root)}:{node.lineno}"
        for path in sorted(root.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.FunctionDef) and node.name == "endpoint_snapshot"
    ]
    assert len(defined) == 1 and defined[0].startswith("domain/endpoints.py"), defined


def test_snapshot_treats_null_spec_and_null_retry_fields_as_missing() -> None:
    row = {
        "name": "ep",
        "endpoint_type": "KAFKA",
        "spec": None,
        "retry_policy": {"max_attempts": 4, "backoff": None},
    }
    snapshot = endpoint_snapshot(row)
    assert snapshot["spec"] == {"acks": "all", "timeout_ms": 10000}
    assert snapshot["retry_policy"] == {**RETRY_DEFAULTS, "max_attempts": 4}
    assert (snapshot["config_ref"], snapshot["payload_spec_ref"]) == (None, None)
