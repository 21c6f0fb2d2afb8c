"""Endpoints: validation of a registration, its defaults, and the snapshot jobs keep.

Pure: no database, no environment. The API validates a body with :func:`parse_endpoint`
(shape, types, defaults, template namespaces), then checks the references that need the
database (payload spec, config, secrets) itself.

Rules, per the specification's field tables:

* ``spec`` fields by type (:data:`SPEC_RULES`); unknown or missing fields, wrong types and
  bad values are 400 INVALID_REQUEST. Defaults: HTTP ``timeout_ms`` 30000 (the
  specification gives none) and ``expected_status_codes`` [200, 201, 202, 204]; KAFKA
  ``acks`` "all" and ``timeout_ms`` 10000; REDIS_STREAM ``approximate_trimming`` true and
  ``timeout_ms`` 3000. ``timeout_ms`` is 1..300000.
* The payload: without a template an endpoint sends the job's input (:data:`INPUT_TEMPLATE`,
  ``"{{input}}"``): HTTP ``body_template`` (every method but GET, which sends no body),
  KAFKA ``value_template``, and REDIS_STREAM ``fields_template`` as one field ``input``
  holding the input's compact JSON. ``body_template`` and ``value_template`` are an object
  or a string that is exactly one placeholder (the value it names, with its JSON type); an
  HTTP endpoint with a form, XML or text ``Content-Type`` may give a ``body_template``
  string with text around its placeholders, sent as that text (:mod:`.body_text`).
* Targets: a literal ``url`` must be an absolute http(s) URL with a host, a literal
  ``redis_url`` a redis://, rediss:// or unix:// URL; a templated one must begin with such a
  scheme or with its placeholder (checked again once rendered). 422 INVALID_TARGET
  otherwise, naming the field: such an endpoint could never deliver.
* Every type accepts an optional
  ``max_concurrent`` (1..10000): how many of this endpoint's deliveries one worker runs at
  once (default: ``TE_WORKER_ENDPOINT_SHARE`` of ``TE_WORKER_MAX_CONCURRENT``), and an
  optional ``signing_secret`` (a secret's name: deliveries are signed, see
  :mod:`chalicelib.domain.signing`).
* Each field accepts only the template namespaces its table lists. A placeholder whose
  namespace is unknown or not allowed in that field, a ``{{config.*}}`` when the endpoint
  has no config, and a ``{{secret.*}}`` with a nested path are 422
  TEMPLATE_RESOLUTION_FAILED. One deliberate widening: KAFKA ``headers`` also accept
  ``{{input.*}}``, because the specification's own Kafka example uses it there.
* ``retry_policy`` (:data:`RETRY_DEFAULTS`): ``max_attempts`` 1..100, ``backoff`` fixed |
  linear | exponential, delays 0..86400000 ms with ``initial_delay_ms <= max_delay_ms``, and
  an optional ``max_retry_duration_ms`` (1..30 days): no retry is scheduled to start later
  than the first attempt's start plus this. A job may override each field for itself
  (:mod:`chalicelib.domain.job_delivery`).
* ``auto_pause_after_ms`` (:mod:`chalicelib.domain.auto_pause`): how long every attempt may
  fail before the endpoint pauses itself; five days when omitted, 60000..2592000000, null
  for never.
* HTTP ``allowed_url_prefixes``: the URL prefixes a job of the endpoint may name as its own
  ``url`` (:mod:`chalicelib.domain.url_prefixes`); without it a job has no URL of its own.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from chalicelib.domain.auto_pause import DEFAULT_AUTO_PAUSE_AFTER_MS, parse_auto_pause_after_ms
from chalicelib.domain.body_text import FORM, text_encoder
from chalicelib.domain.names import check_endpoint_name
from chalicelib.domain.signing import check_signing_secret_field
from chalicelib.domain.templates import (
    NAMESPACES,
    PLACEHOLDER,
    WHOLE,
    Placeholder,
    find_placeholders,
    whole_placeholder,
)
from chalicelib.domain.url_prefixes import check_prefixes
from chalicelib.errors import InvalidTarget, TemplateResolutionFailed, ValidationFailed

ENDPOINT_TYPES = ("HTTP", "KAFKA", "REDIS_STREAM")
HTTP_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
KAFKA_ACKS = ("0", "1", "all")
BACKOFFS = ("fixed", "linear", "exponential")
MAX_TIMEOUT_MS = 300_000
MAX_DELAY_MS = 86_400_000
MAX_ATTEMPTS = 100
#: Upper bound of ``retry_policy.max_retry_duration_ms`` (30 days).
MAX_RETRY_DURATION_MS = 30 * 86_400_000
#: Upper bound of a spec's ``max_concurrent`` (deliveries of one endpoint per worker).
MAX_CONCURRENT = 10_000

RETRY_DEFAULTS: dict[str, Any] = {
    "max_attempts": 1,
    "backoff": "exponential",
    "initial_delay_ms": 1000,
    "max_delay_ms": 60000,
}
#: Every field a retry policy may set (the optional ones have no default).
RETRY_FIELDS = (*RETRY_DEFAULTS, "max_retry_duration_ms")

_CONFIG = frozenset({"config"})
_CONFIG_SECRET = frozenset({"config", "secret"})
_INPUT_CONFIG = frozenset({"input", "config"})
_ALL = frozenset(NAMESPACES)
_NONE: frozenset[str] = frozenset()

Check = Callable[[str, Any], None]


def _fail(where: str, what: str) -> None:
    raise ValidationFailed(f"Field '{where}' must be {what}.")


def _string(where: str, value: Any) -> None:
    if not isinstance(value, str) or not value.strip():
        _fail(where, "a non-empty string")


def _non_empty_object(where: str, value: Any) -> None:
    if not isinstance(value, dict) or not value:
        _fail(where, "a non-empty object")


def _string_map(where: str, value: Any) -> None:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        _fail(where, "an object whose values are strings")


def _boolean(where: str, value: Any) -> None:
    if not isinstance(value, bool):
        _fail(where, "a boolean")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _timeout(where: str, value: Any) -> None:
    if not _is_int(value) or not 1 <= value <= MAX_TIMEOUT_MS:
        _fail(where, f"an integer between 1 and {MAX_TIMEOUT_MS}")


def _max_concurrent(where: str, value: Any) -> None:
    if not _is_int(value) or not 1 <= value <= MAX_CONCURRENT:
        _fail(where, f"an integer between 1 and {MAX_CONCURRENT}")


def _status_codes(where: str, value: Any) -> None:
    ok = isinstance(value, list) and value and len(set(map(str, value))) == len(value)
    if not ok or not all(_is_int(c) and 100 <= c <= 599 for c in value):
        _fail(where, "a non-empty array of distinct HTTP status codes (100-599)")


def _one_of(choices: tuple[str, ...]) -> Check:
    def check(where: str, value: Any) -> None:
        if value not in choices or not isinstance(value, str):
            _fail(where, "one of " + ", ".join(f'"{c}"' for c in choices))

    return check


#: The payload of an endpoint without a template: the job's input, as is (null without one).
INPUT_TEMPLATE = "{{" + WHOLE + "}}"


def _payload_template(where: str, value: Any) -> None:
    if isinstance(value, dict) or (isinstance(value, str) and whole_placeholder(value)):
        return
    _fail(where, 'an object, or a string that is exactly one placeholder such as "{{input}}"')


def _http_body_template(where: str, value: Any) -> None:
    """An object or any string here; a string with text around its placeholders is checked
    against the spec's Content-Type by :func:`_check_text_body`."""
    if not isinstance(value, dict | str):
        _payload_template(where, value)


def _check_text_body(spec: Mapping[str, Any]) -> None:
    """A ``body_template`` string that is more than one placeholder is a text body: the
    endpoint must send a Content-Type whose values it can encode (:mod:`.body_text`)."""
    body = spec.get("body_template")
    if not isinstance(body, str) or whole_placeholder(body) or text_encoder(spec) is not None:
        return
    _fail(
        "spec.body_template",
        'an object, or a string that is exactly one placeholder such as "{{input}}"; a text '
        "body (text around placeholders) needs a literal Content-Type header in spec.headers "
        f"of {FORM}, text/* or XML (application/xml, text/xml, application/*+xml)",
    )


HTTP_SCHEMES = ("http", "https")
REDIS_SCHEMES = ("redis", "rediss", "unix")


def _target_url(schemes: tuple[str, ...], *, host: bool) -> Check:
    """A URL the transport can deliver to: a literal one parsed as the worker parses it
    (``host``: it must name one), a templated one checked up to its first placeholder."""
    wanted = " or ".join(f"{scheme}://" for scheme in schemes)

    def check(where: str, value: Any) -> None:
        _string(where, value)
        first = PLACEHOLDER.search(value)
        if first is None:
            problem = _literal_url_problem(value, schemes, host=host)
        else:
            problem = _prefix_problem(value[: first.start()], schemes, host=host)
        if problem:
            raise InvalidTarget(f"Field '{where}' must be an absolute {wanted} URL: {problem}.")

    return check


def _literal_url_problem(url: str, schemes: tuple[str, ...], *, host: bool) -> str | None:
    # The worker's parser, so both judge a URL alike; imported on first use (70 ms that the
    # API's cold start would otherwise pay).
    from urllib3.exceptions import LocationParseError
    from urllib3.util import parse_url

    try:
        parsed = parse_url(url)
    except LocationParseError:
        return "it cannot be parsed as a URL"
    if parsed.scheme is None or "://" not in url:
        return "it does not begin with a scheme and ://"
    if parsed.scheme not in schemes:
        return "its scheme is not one of them"
    if host and not parsed.host:
        return "it names no host"
    return None


#: ``redis_url`` query parameters an endpoint may set: redis-py turns any other into a
#: ``Connection`` keyword (an unknown one fails every delivery), and the ones it knows that
#: set timeouts, retries or pool sizes would override the bounds the worker sets.
REDIS_URL_PARAMETERS = (
    "db",
    "username",
    "password",
    "protocol",
    "socket_keepalive",
    "ssl_check_hostname",
    "ssl_min_version",
    "ssl_include_verify_flags",
    "ssl_exclude_verify_flags",
)
#: The target fields whose address (host and port) a secret must never form: the worker
#: would send it to DNS resolvers as a name, and resolvers log what they are asked.
ADDRESS_FIELDS = {"HTTP": "url", "KAFKA": "bootstrap_servers", "REDIS_STREAM": "redis_url"}


def check_redis_url_parameters(where: str, url: str) -> None:
    """422 INVALID_TARGET for a query parameter outside :data:`REDIS_URL_PARAMETERS` (or
    whose name is templated), naming it and the allowed ones."""
    query = url.partition("?")[2].partition("#")[0]
    for pair in filter(None, query.split("&")):
        name = pair.partition("=")[0]
        if name in REDIS_URL_PARAMETERS:
            continue
        raise InvalidTarget(
            f"Field '{where}' has the query parameter {name!r}, which is not allowed "
            f"(allowed: {', '.join(REDIS_URL_PARAMETERS)})."
        )


def check_secret_free_address(endpoint_type: str, spec: Mapping[str, Any]) -> None:
    """422 INVALID_TARGET when ``{{secret.*}}`` forms part of a target's host or port: the
    value would go to DNS as a name. User info (before ``@``), path, query and headers may
    hold secrets; ``bootstrap_servers`` is all addresses."""
    where = ADDRESS_FIELDS[endpoint_type]
    value = spec.get(where)
    if not isinstance(value, str):
        return
    address = value if endpoint_type == "KAFKA" else _authority_text(value)
    for found in PLACEHOLDER.finditer(address):
        if found.group(1) != "secret":
            continue
        if endpoint_type != "KAFKA" and "@" in address[found.end() :]:
            continue  # user info: a password, never resolved
        raise InvalidTarget(
            f"Field 'spec.{where}' uses {found.group()} in its host or port: a secret would be "
            "sent to DNS resolvers as a name. Put secrets in the user info, path, query or "
            "headers."
        )


def _authority_text(url: str) -> str:
    """Everything before a URL's path, query or fragment (scheme, user info, host, port)."""
    start = url.find("://")
    start = 0 if start < 0 else start + 3
    ends = [i for i in (url.find(c, start) for c in "/?#") if i >= 0]
    return url[: min(ends)] if ends else url


def _prefix_problem(prefix: str, schemes: tuple[str, ...], *, host: bool) -> str | None:
    """The literal text before a URL's first placeholder: empty (the placeholder supplies
    the scheme), the start of an allowed scheme, or such a scheme followed by text; when
    that text holds the whole authority (a path follows), it must name a host."""
    text = prefix.lower()
    starts = [f"{scheme}://" for scheme in schemes]
    if not text or any(start.startswith(text) for start in starts):
        return None
    if not any(text.startswith(start) for start in starts):
        return "its text before the first placeholder does not begin with one"
    after_scheme = text.index("://") + 3
    ends = [i for i in (text.find(c, after_scheme) for c in "/?#") if i >= 0]
    if host and ends:
        return _literal_url_problem(prefix[: min(ends)], schemes, host=host)
    return None


def _max_len(where: str, value: Any) -> None:
    if _is_int(value) and value > 0:
        return
    if isinstance(value, str) and PLACEHOLDER.fullmatch(value.strip()):
        return
    _fail(where, "a positive integer or a single {{config.*}} placeholder")


@dataclass(frozen=True)
class FieldRule:
    """One ``spec`` field: its check, whether required, its namespaces and default."""

    check: Check
    required: bool = False
    namespaces: frozenset[str] = _NONE
    default: Any = None


SPEC_RULES: dict[str, dict[str, FieldRule]] = {
    "HTTP": {
        "url": FieldRule(_target_url(HTTP_SCHEMES, host=True), True, _CONFIG_SECRET),
        "method": FieldRule(_one_of(HTTP_METHODS), True),
        "headers": FieldRule(_string_map, namespaces=_CONFIG_SECRET),
        "body_template": FieldRule(_http_body_template, namespaces=_ALL),
        "timeout_ms": FieldRule(_timeout, default=30000),
        "max_concurrent": FieldRule(_max_concurrent),
        "expected_status_codes": FieldRule(_status_codes, default=[200, 201, 202, 204]),
        "signing_secret": FieldRule(check_signing_secret_field),
        "allowed_url_prefixes": FieldRule(check_prefixes),
    },
    "KAFKA": {
        # Only addresses: a secret there would be a name sent to DNS (ADDRESS_FIELDS).
        "bootstrap_servers": FieldRule(_string, True, _CONFIG),
        "topic": FieldRule(_string, True, _CONFIG),
        "key_template": FieldRule(_string, namespaces=_INPUT_CONFIG),
        "value_template": FieldRule(_payload_template, namespaces=_ALL, default=INPUT_TEMPLATE),
        "headers": FieldRule(_string_map, namespaces=_ALL),
        "acks": FieldRule(_one_of(KAFKA_ACKS), default="all"),
        "timeout_ms": FieldRule(_timeout, default=10000),
        "max_concurrent": FieldRule(_max_concurrent),
        "signing_secret": FieldRule(check_signing_secret_field),
    },
    "REDIS_STREAM": {
        "redis_url": FieldRule(_target_url(REDIS_SCHEMES, host=False), True, _CONFIG_SECRET),
        "stream": FieldRule(_string, True, _CONFIG),
        "fields_template": FieldRule(
            _non_empty_object, namespaces=_ALL, default={"input": INPUT_TEMPLATE}
        ),
        "max_len": FieldRule(_max_len, namespaces=_CONFIG),
        "approximate_trimming": FieldRule(_boolean, default=True),
        "timeout_ms": FieldRule(_timeout, default=3000),
        "max_concurrent": FieldRule(_max_concurrent),
        "signing_secret": FieldRule(check_signing_secret_field),
    },
}


@dataclass(frozen=True, kw_only=True)
class EndpointDefinition:
    """A validated endpoint with defaults applied; ``secrets`` are the names it uses."""

    name: str
    type: str
    payload_spec: str | None
    config: str | None
    spec: dict[str, Any]
    retry_policy: dict[str, Any]
    secrets: frozenset[str] = field(default_factory=frozenset)
    #: Cluster-wide limits (:func:`validate_flow_control`); None when the endpoint sets none.
    flow_control: dict[str, Any] | None = None
    #: What a failed head of an ordering key does (:func:`validate_ordering`); None: skip.
    ordering: dict[str, Any] | None = None
    #: Default callbacks of the endpoint's jobs (endpoint names; a job may name its own).
    on_success: str | None = None
    on_failure: str | None = None
    #: How long every attempt may fail before the endpoint pauses itself (FAILING); None:
    #: never (:mod:`chalicelib.domain.auto_pause`).
    auto_pause_after_ms: int | None = DEFAULT_AUTO_PAUSE_AFTER_MS


def _check_unknown_and_missing(
    where: str, body: Mapping[str, Any], allowed: Iterable[str], required: Iterable[str] = ()
) -> None:
    unknown = sorted(set(body) - set(allowed))
    if unknown:
        raise ValidationFailed(f"Unknown field(s) in '{where}': {', '.join(unknown)}.")
    missing = [k for k in required if body.get(k) is None]
    if missing:
        raise ValidationFailed(f"Missing required field(s) in '{where}': {', '.join(missing)}.")


def apply_spec_defaults(endpoint_type: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    """``spec`` with every omitted defaulted field filled in (no validation)."""
    result = dict(spec)
    for name, rule in SPEC_RULES.get(endpoint_type, {}).items():
        if result.get(name) is None and rule.default is not None:
            result[name] = copy.deepcopy(rule.default)
    if endpoint_type == "HTTP" and result.get("body_template") is None and _has_body(result):
        result["body_template"] = INPUT_TEMPLATE
    return {k: v for k, v in result.items() if v is not None}


def _has_body(spec: Mapping[str, Any]) -> bool:
    """Whether a request of this HTTP spec carries a body by default: every method but GET
    (read as the worker reads it; a stored row may hold anything)."""
    return str(spec.get("method") or "POST").upper() != "GET"


def validate_spec(endpoint_type: str, spec: Any) -> dict[str, Any]:
    """Shape and types of ``spec`` for ``endpoint_type``; returns it with defaults."""
    if not isinstance(spec, dict):
        raise ValidationFailed("Field 'spec' must be an object.")
    rules = SPEC_RULES[endpoint_type]
    _check_unknown_and_missing("spec", spec, rules, [k for k, r in rules.items() if r.required])
    for name, value in spec.items():
        if value is not None:
            rules[name].check(f"spec.{name}", value)
    if endpoint_type == "HTTP":
        _check_text_body(spec)
    return apply_spec_defaults(endpoint_type, spec)


def check_template_namespaces(
    endpoint_type: str, spec: Mapping[str, Any], *, has_config: bool
) -> frozenset[str]:
    """Reject placeholders a field does not support; return the secret names used."""
    secrets: set[str] = set()
    rules = SPEC_RULES[endpoint_type]
    for name, value in spec.items():
        allowed = rules[name].namespaces
        for _, placeholder in find_placeholders(value):
            _check_placeholder(f"spec.{name}", placeholder, allowed)
            if placeholder.namespace == "config" and not has_config:
                raise TemplateResolutionFailed(
                    f"'spec.{name}' uses {placeholder} but the endpoint has no 'config'."
                )
            if placeholder.namespace == "secret":
                secrets.add(placeholder.path)
    return frozenset(secrets)


def _check_placeholder(where: str, placeholder: Placeholder, allowed: frozenset[str]) -> None:
    namespace, path, text = placeholder.namespace, placeholder.path, str(placeholder)
    if namespace not in NAMESPACES:
        raise TemplateResolutionFailed(
            f"'{where}' uses {text}: unknown namespace '{namespace}' (use input, config or secret)."
        )
    if namespace not in allowed:
        supported = ", ".join(f"{{{{{n}.*}}}}" for n in NAMESPACES if n in allowed) or "none"
        raise TemplateResolutionFailed(
            f"'{where}' does not support {{{{{namespace}.*}}}} (found {text}; supported: "
            f"{supported})."
        )
    if namespace == "secret" and "." in path:
        raise TemplateResolutionFailed(
            f"'{where}' uses {text}: a secret placeholder names one secret, {{{{secret.<name>}}}}."
        )


def validate_retry_policy(policy: Any) -> dict[str, Any]:
    """``retry_policy`` with defaults for omitted fields, ranges checked (400)."""
    if policy is None:
        return dict(RETRY_DEFAULTS)
    result = retry_policy_with_defaults(check_retry_fields(policy))
    if result["initial_delay_ms"] > result["max_delay_ms"]:
        _fail("retry_policy.initial_delay_ms", "less than or equal to max_delay_ms")
    return result


def check_retry_fields(policy: Any) -> dict[str, Any]:
    """The fields a retry policy gives (nulls dropped), each checked (400 naming it); no
    defaults added: a job's policy overrides only what it gives."""
    if not isinstance(policy, dict):
        raise ValidationFailed("Field 'retry_policy' must be an object.")
    _check_unknown_and_missing("retry_policy", policy, RETRY_FIELDS)
    given = {k: v for k, v in policy.items() if v is not None}
    attempts = given.get("max_attempts", 1)
    if not _is_int(attempts) or not 1 <= attempts <= MAX_ATTEMPTS:
        _fail("retry_policy.max_attempts", f"an integer between 1 and {MAX_ATTEMPTS}")
    if "backoff" in given:
        _one_of(BACKOFFS)("retry_policy.backoff", given["backoff"])
    for name in ("initial_delay_ms", "max_delay_ms"):
        delay = given.get(name, 0)
        if not _is_int(delay) or not 0 <= delay <= MAX_DELAY_MS:
            _fail(f"retry_policy.{name}", f"an integer between 0 and {MAX_DELAY_MS}")
    duration = given.get("max_retry_duration_ms", 1)
    if not _is_int(duration) or not 1 <= duration <= MAX_RETRY_DURATION_MS:
        _fail(
            "retry_policy.max_retry_duration_ms",
            f"an integer between 1 and {MAX_RETRY_DURATION_MS}",
        )
    return given


#: Bounds of ``flow_control``: a rate of up to 100,000 per period, periods from 1 ms to a
#: day, and as many concurrent deliveries as one worker may hold of an endpoint.
MAX_RATE_LIMIT = 100_000
MAX_RATE_PERIOD_MS = 86_400_000
#: The most executions of one concurrency key that may run at once.
MAX_CONCURRENCY_PER_KEY = 10_000


def validate_flow_control(flow: Any) -> dict[str, Any] | None:
    """``flow_control``: ``{"rate_limit": {"limit", "period_ms"}, "max_concurrency",
    "max_concurrency_per_key"}``, all parts optional (400 otherwise). None (or ``{}``) means
    no flow control: such an endpoint stays on the claim's fast path. Enforced cluster-wide:
    the rate and ``max_concurrency`` by the worker's metered claim, ``max_concurrency_per_key``
    (executions sharing a ``concurrency_key``) by each key's settle
    (:mod:`chalicelib.services.keys`)."""
    if flow is None:
        return None
    if not isinstance(flow, dict):
        raise ValidationFailed("Field 'flow_control' must be an object.")
    _check_unknown_and_missing(
        "flow_control", flow, ("rate_limit", "max_concurrency", "max_concurrency_per_key")
    )
    result: dict[str, Any] = {}
    if flow.get("rate_limit") is not None:
        result["rate_limit"] = _rate_limit(flow["rate_limit"])
    concurrency = flow.get("max_concurrency")
    if concurrency is not None:
        _max_concurrent("flow_control.max_concurrency", concurrency)
        result["max_concurrency"] = concurrency
    per_key = flow.get("max_concurrency_per_key")
    if per_key is not None:
        if not _is_int(per_key) or not 1 <= per_key <= MAX_CONCURRENCY_PER_KEY:
            _fail(
                "flow_control.max_concurrency_per_key",
                f"an integer between 1 and {MAX_CONCURRENCY_PER_KEY}",
            )
        result["max_concurrency_per_key"] = per_key
    return result or None


def _rate_limit(rate: Any) -> dict[str, Any]:
    if not isinstance(rate, dict):
        raise ValidationFailed("Field 'flow_control.rate_limit' must be an object.")
    fields = ("limit", "period_ms")
    _check_unknown_and_missing("flow_control.rate_limit", rate, fields, fields)
    for name, top in (("limit", MAX_RATE_LIMIT), ("period_ms", MAX_RATE_PERIOD_MS)):
        if not _is_int(rate[name]) or not 1 <= rate[name] <= top:
            _fail(f"flow_control.rate_limit.{name}", f"an integer between 1 and {top}")
    return {"limit": rate["limit"], "period_ms": rate["period_ms"]}


#: What an ordering key does when its head ends FAILED: the next execution starts (skip),
#: or the key waits for an operator's retry or skip (block).
ORDERING_ON_FAILURE = ("skip", "block")


def validate_ordering(ordering: Any) -> dict[str, Any] | None:
    """``ordering``: ``{"on_failure": "skip" | "block"}`` (400 naming the field
    otherwise); None (or ``{}``) is the default, skip."""
    if ordering is None:
        return None
    if not isinstance(ordering, dict):
        raise ValidationFailed("Field 'ordering' must be an object.")
    _check_unknown_and_missing("ordering", ordering, ("on_failure",))
    on_failure = ordering.get("on_failure")
    if on_failure is None:
        return None
    if on_failure not in ORDERING_ON_FAILURE:
        _fail("ordering.on_failure", "one of " + ", ".join(ORDERING_ON_FAILURE))
    return {"on_failure": on_failure}


def _optional_ref(body: Mapping[str, Any], name: str) -> str | None:
    value = body.get(name)
    if value is not None and (not isinstance(value, str) or not value):
        _fail(name, "a non-empty string naming a registered resource")
    return value


ENDPOINT_BODY_FIELDS = (
    "name",
    "type",
    "payload_spec",
    "config",
    "spec",
    "retry_policy",
    "flow_control",
    "ordering",
    "on_success",
    "on_failure",
    "auto_pause_after_ms",
)


def parse_endpoint(body: Mapping[str, Any], *, path_name: str | None = None) -> EndpointDefinition:
    """Validate a POST (``path_name`` None) or PUT body into an :class:`EndpointDefinition`.

    For PUT the name comes from the path; a ``name`` in the body must equal it.
    """
    required = ["type", "spec"] if path_name is not None else ["name", "type", "spec"]
    _check_unknown_and_missing("body", body, ENDPOINT_BODY_FIELDS, required)
    if path_name is not None and body.get("name") not in (None, path_name):
        raise ValidationFailed("Field 'name' cannot change: it must match the URL.")
    name = check_endpoint_name(path_name if path_name is not None else body["name"])
    endpoint_type = body["type"]
    _one_of(ENDPOINT_TYPES)("type", endpoint_type)
    config = _optional_ref(body, "config")
    spec = validate_spec(endpoint_type, body["spec"])
    secrets = check_template_namespaces(endpoint_type, spec, has_config=config is not None)
    check_secret_free_address(endpoint_type, spec)
    if endpoint_type == "REDIS_STREAM":
        check_redis_url_parameters("spec.redis_url", spec["redis_url"])
    return EndpointDefinition(
        name=name,
        type=endpoint_type,
        payload_spec=_optional_ref(body, "payload_spec"),
        config=config,
        spec=spec,
        retry_policy=validate_retry_policy(body.get("retry_policy")),
        flow_control=validate_flow_control(body.get("flow_control")),
        ordering=validate_ordering(body.get("ordering")),
        secrets=secrets,
        on_success=_optional_ref(body, "on_success"),
        on_failure=_optional_ref(body, "on_failure"),
        auto_pause_after_ms=parse_auto_pause_after_ms(body),
    )


def retry_policy_with_defaults(policy: Mapping[str, Any] | None) -> dict[str, Any]:
    """The endpoint's retry policy with the spec's defaults for every missing field."""
    return {**RETRY_DEFAULTS, **{k: v for k, v in (policy or {}).items() if v is not None}}


def endpoint_snapshot(row: Mapping[str, Any]) -> dict[str, Any]:
    """``jobs.endpoint_snapshot`` built from an ``endpoints`` row: the contract the worker
    reads (name, type, spec, retry_policy, config_ref, payload_spec_ref), and the only
    function that builds it.

    Defaults are applied again (spec and retry policy; a NULL spec or a null field counts as
    missing) so a row written before a default existed still yields a complete snapshot.
    """
    endpoint_type = str(row["endpoint_type"])
    return {
        "name": row["name"],
        "type": endpoint_type,
        "spec": apply_spec_defaults(endpoint_type, row["spec"] or {}),
        "retry_policy": retry_policy_with_defaults(row.get("retry_policy")),
        "config_ref": row.get("config_ref"),
        "payload_spec_ref": row.get("payload_spec_ref"),
    }
