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
from chalicelib.domain.names import check_catalogue_name, check_endpoint_name
from chalicelib.domain.payload_specs import check_schema
from chalicelib.domain.timefmt import iso
from chalicelib.errors import (
    InvalidSchema,
    InvalidTarget,
    TemplateResolutionFailed,
    ValidationFailed,
)


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
    with pytest.raises(ValidationFailed, match="bootstrap_servers, topic"):
        parse_endpoint(body("KAFKA", {"acks": "all"}))


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
    ("KAFKA", "bootstrap_servers", "{{secret.s}}", False),
    ("KAFKA", "bootstrap_servers", "{{config.b}}", True),
    ("KAFKA", "topic", "{{secret.s}}", False),
    ("KAFKA", "topic", "{{input.t}}", False),
    ("KAFKA", "key_template", "{{input.k}}-{{config.c}}", True),
    ("KAFKA", "key_template", "{{secret.s}}", False),
    ("KAFKA", "headers", {"ce-type": "order.{{input.event_type}}"}, True),
    ("REDIS_STREAM", "stream", "{{config.s}}", True),
    ("REDIS_STREAM", "stream", "{{input.s}}", False),
    ("REDIS_STREAM", "redis_url", "redis://:{{secret.s}}@cache.example.com:6379/0", True),
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
        "url": "https://hooks.example.com/{{secret.base}}",
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
    assert apply_spec_defaults("KAFKA", {"acks": None}) == {
        "acks": "all",
        "timeout_ms": 10000,
        "value_template": "{{input}}",
    }


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
    assert check_catalogue_name("email_api_key") == "email_api_key"
    for bad in ("_x", "-x", "A", "a.b", "a b", "x" * 101):
        with pytest.raises(ValidationFailed):
            check_catalogue_name(bad)


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
    assert snapshot["spec"] == {"acks": "all", "timeout_ms": 10000, "value_template": "{{input}}"}
    assert snapshot["retry_policy"] == {**RETRY_DEFAULTS, "max_attempts": 4}
    assert (snapshot["config_ref"], snapshot["payload_spec_ref"]) == (None, None)


# -- the payload of an endpoint without a template -------------------------------------------


@pytest.mark.parametrize(
    ("endpoint_type", "spec", "field", "default"),
    [
        ("HTTP", {"url": "https://x", "method": "POST"}, "body_template", "{{input}}"),
        ("HTTP", {"url": "https://x", "method": "DELETE"}, "body_template", "{{input}}"),
        ("KAFKA", {"bootstrap_servers": "k:9092", "topic": "t"}, "value_template", "{{input}}"),
        (
            "REDIS_STREAM",
            {"redis_url": "redis://r", "stream": "s"},
            "fields_template",
            {"input": "{{input}}"},
        ),
    ],
)
def test_without_a_template_the_input_is_the_payload(
    endpoint_type: str, spec: dict[str, Any], field: str, default: Any
) -> None:
    assert parse_endpoint(body(endpoint_type, spec)).spec[field] == default
    # A row stored before the default existed gets it in the snapshot of its next jobs.
    row = {"name": "ep", "endpoint_type": endpoint_type, "spec": spec, "retry_policy": None}
    assert endpoint_snapshot(row)["spec"][field] == default


def test_a_get_request_has_no_default_body() -> None:
    spec = parse_endpoint(body("HTTP", {"url": "https://x", "method": "GET"})).spec
    assert "body_template" not in spec


@pytest.mark.parametrize(
    "template",
    ["{{input}}", " {{ input }} ", "{{input.order}}", "{{config.body}}", "{{secret.s}}"],
)
@pytest.mark.parametrize(
    ("endpoint_type", "field"), [("HTTP", "body_template"), ("KAFKA", "value_template")]
)
def test_a_payload_template_may_be_one_whole_placeholder(
    endpoint_type: str, field: str, template: str
) -> None:
    spec = {**body(endpoint_type)["spec"], field: template}
    assert parse_endpoint(body(endpoint_type, spec, config="c")).spec[field] == template


@pytest.mark.parametrize("template", ["text", "{{input}} and more", "{{name}}", "", 5, ["a"]])
@pytest.mark.parametrize(
    ("endpoint_type", "field"), [("HTTP", "body_template"), ("KAFKA", "value_template")]
)
def test_other_payload_strings_are_400(endpoint_type: str, field: str, template: Any) -> None:
    spec = {**body(endpoint_type)["spec"], field: template}
    with pytest.raises(ValidationFailed, match=f"spec.{field}.*exactly one placeholder"):
        parse_endpoint(body(endpoint_type, spec))


def test_fields_template_stays_an_object() -> None:
    spec = {**body("REDIS_STREAM")["spec"], "fields_template": "{{input}}"}
    with pytest.raises(ValidationFailed, match=r"spec\.fields_template"):
        parse_endpoint(body("REDIS_STREAM", spec))


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ({"a": "{{inptu.x}}"}, "unknown namespace 'inptu'"),
        ("{{env.HOME}}", "unknown namespace 'env'"),
        ({"a": "{{secret.s.inner}}"}, "names one secret"),
    ],
)
def test_payload_placeholders_name_known_namespaces(template: Any, message: str) -> None:
    spec = {**body("HTTP")["spec"], "body_template": template}
    with pytest.raises(TemplateResolutionFailed, match=rf"spec\.body_template.*{message}"):
        parse_endpoint(body("HTTP", spec))


def test_bare_input_obeys_the_fields_namespaces() -> None:
    spec = {"url": "https://x/{{input}}", "method": "POST"}
    with pytest.raises(TemplateResolutionFailed, match=r"spec\.url.*\{\{input\}\}"):
        parse_endpoint(body("HTTP", spec))


# -- targets ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("not a url", "cannot be parsed"),
        ("ftp://127.0.0.1/x", "its scheme is not one of them"),
        ("https://", "names no host"),
        ("http:///path", "names no host"),
        ("localhost:8080/x", "does not begin with a scheme"),
        ("//x.example/a", "does not begin with a scheme"),
        ("https://exa mple.com/", "cannot be parsed"),
        ("http://x.example:99999/", "cannot be parsed"),
        ("ftp://{{config.host}}/x", "before the first placeholder"),
        ("x{{config.base}}", "before the first placeholder"),
        ("https:///{{config.path}}", "names no host"),
    ],
)
def test_an_http_url_that_can_never_be_delivered_to_is_422(url: str, why: str) -> None:
    with pytest.raises(InvalidTarget, match=rf"'spec\.url'.*{why}") as raised:
        parse_endpoint(body("HTTP", {"url": url, "method": "POST"}, config="c"))
    assert (raised.value.status, raised.value.code) == (422, "INVALID_TARGET")


@pytest.mark.parametrize(
    "url",
    [
        "https://x.example",
        "HTTP://X.example:8080/a?b=1#c",
        "http://127.0.0.1:9/x",
        "https://[::1]:8443/",
        "{{config.base}}/emails/welcome",
        "https://{{config.host}}/x",
        "https://api.example/{{config.path}}",
        "http{{config.tls}}://x.example/",
        "https://hooks.example/services/{{secret.path}}",
        "https://user:{{secret.password}}@x.example/",
    ],
)
def test_deliverable_http_urls_are_accepted(url: str) -> None:
    spec = parse_endpoint(body("HTTP", {"url": url, "method": "POST"}, config="c")).spec
    assert spec["url"] == url


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("redis://r:6379/0", True),
        ("rediss://r", True),
        ("unix:///run/redis.sock", True),
        ("{{config.redis_url}}", True),
        ("redis://{{secret.auth}}@r", True),
        ("http://r:6379", False),
        ("r:6379", False),
        ("tcp://{{config.host}}", False),
    ],
)
def test_redis_urls_name_a_redis_scheme(url: str, ok: bool) -> None:
    spec = {**body("REDIS_STREAM")["spec"], "redis_url": url}
    if ok:
        assert parse_endpoint(body("REDIS_STREAM", spec, config="c")).spec["redis_url"] == url
    else:
        with pytest.raises(InvalidTarget, match=r"'spec\.redis_url'"):
            parse_endpoint(body("REDIS_STREAM", spec, config="c"))


# -- a secret never forms a target's address; redis_url parameters are known ---------------


@pytest.mark.parametrize(
    ("endpoint_type", "field", "value"),
    [
        ("HTTP", "url", "{{secret.full_url}}"),
        ("HTTP", "url", "https://{{secret.host}}/x"),
        ("HTTP", "url", "https://api-{{ secret.host }}.example.com/x"),
        ("HTTP", "url", "https://x.example:{{secret.port}}/"),
        ("HTTP", "url", "https://{{secret.user}}@{{secret.host}}?q=1"),
        ("HTTP", "url", "{{config.base}}{{secret.rest}}"),
        ("REDIS_STREAM", "redis_url", "redis://{{secret.host}}:6379/0"),
        ("REDIS_STREAM", "redis_url", "rediss://:{{config.pw}}@{{secret.host}}"),
    ],
)
def test_a_secret_in_a_targets_host_or_port_is_refused(
    endpoint_type: str, field: str, value: str
) -> None:
    spec = {**body(endpoint_type)["spec"], field: value}
    with pytest.raises(InvalidTarget, match=r"host or port: a secret would be sent to DNS"):
        parse_endpoint(body(endpoint_type, spec, config="c"))


def test_kafka_bootstrap_servers_take_no_secret() -> None:
    spec = {**body("KAFKA")["spec"], "bootstrap_servers": "{{secret.b}}:9092"}
    with pytest.raises(TemplateResolutionFailed, match=r"spec\.bootstrap_servers"):
        parse_endpoint(body("KAFKA", spec))


@pytest.mark.parametrize(
    "url",
    ["redis://r/0?foo=bar", "redis://r?db=1&retry_on_timeout=1", "rediss://r?{{config.k}}=1"],
)
def test_unknown_redis_url_parameters_are_refused_naming_them(url: str) -> None:
    spec = {**body("REDIS_STREAM")["spec"], "redis_url": url}
    with pytest.raises(InvalidTarget, match=r"query parameter .* \(allowed: db, ") as refused:
        parse_endpoint(body("REDIS_STREAM", spec, config="c"))
    assert "'spec.redis_url'" in str(refused.value)


def test_known_redis_url_parameters_are_accepted() -> None:
    url = "rediss://r:6380/0?db=2&protocol=3&ssl_check_hostname=true&password={{secret.p}}"
    spec = {**body("REDIS_STREAM")["spec"], "redis_url": url}
    assert parse_endpoint(body("REDIS_STREAM", spec)).spec["redis_url"] == url


def test_the_allowed_redis_url_parameters_are_ones_redis_py_knows() -> None:
    from redis.connection import URL_QUERY_ARGUMENT_PARSERS, AbstractConnection

    from chalicelib.domain.endpoints import REDIS_URL_PARAMETERS

    known = set(URL_QUERY_ARGUMENT_PARSERS) | {"username", "password"}
    assert set(REDIS_URL_PARAMETERS) <= known
    import inspect

    keywords = set(inspect.signature(AbstractConnection.__init__).parameters)
    assert {"username", "password", "db", "protocol"} <= keywords
