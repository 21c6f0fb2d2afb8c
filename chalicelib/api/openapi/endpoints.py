"""OpenAPI for ``/endpoints``: the lifecycle of :mod:`.catalogue` and the three target specs."""

from __future__ import annotations

from typing import Any

from chalicelib.api.openapi.catalogue import crud_fragment
from chalicelib.api.openapi.common import (
    TIMESTAMP,
    Operation,
    operation,
    page_of,
    paths,
    query_param,
    response_ref,
    schema_ref,
)
from chalicelib.domain.auto_pause import (
    DEFAULT_AUTO_PAUSE_AFTER_MS,
    MAX_AUTO_PAUSE_AFTER_MS,
    MIN_AUTO_PAUSE_AFTER_MS,
    PausedReason,
)
from chalicelib.domain.endpoints import (
    ENDPOINT_TYPES,
    MAX_CONCURRENT,
    MAX_RETRY_DURATION_MS,
    ORDERING_ON_FAILURE,
    REDIS_URL_PARAMETERS,
    RETRY_DEFAULTS,
)
from chalicelib.domain.health import Health
from chalicelib.domain.ordering import ORDERING_KEY_STATES
from chalicelib.domain.url_prefixes import MAX_PREFIXES

_REF = {"type": ["string", "null"], "maxLength": 100}
_RETRY: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "max_attempts": {"type": "integer", "minimum": 1, "maximum": 100, "default": 1},
        "backoff": {"enum": ["fixed", "linear", "exponential"], "default": "exponential"},
        "initial_delay_ms": {"type": "integer", "minimum": 0, "default": 1000},
        "max_delay_ms": {"type": "integer", "minimum": 0, "default": 60000},
        "max_retry_duration_ms": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_RETRY_DURATION_MS,
            "description": "No retry is scheduled to start later than the first attempt's "
            "start plus this; the execution then ends FAILED with its last error. Optional "
            "(no bound by time).",
        },
    },
}
#: A retry policy's fields, as an endpoint and (each one optional) a job set them.
RETRY_POLICY_SCHEMA = _RETRY
_TIMEOUT = {"type": "integer", "minimum": 1, "maximum": 300000}
_WHOLE_VALUE = {
    "type": "string",
    "pattern": r"^\s*\{\{[^{}]+\}\}\s*$",
    "description": 'Exactly one placeholder, such as "{{input}}" or "{{input.order}}": the '
    "value it names, with its JSON type. {{input}} is the job's whole input, null for a job "
    "without input (none, or {}).",
}


def _payload(what: str, default: str) -> dict[str, Any]:
    """A payload template: an object, or one placeholder standing for a whole value."""
    return {
        "oneOf": [{"type": "object"}, _WHOLE_VALUE],
        "description": f"Supports {{{{input.*}}}}, {{{{config.*}}}}, {{{{secret.*}}}}. {what} "
        f"Without it: {default}",
    }


def _target(schemes: str, *, host: str = ", with a host") -> str:
    return (
        f"A literal URL must be absolute, {schemes}{host}; a templated one must begin with "
        "such a scheme or with its placeholder (checked again once rendered). A "
        "{{secret.*}} may not form the host or port (outside the user info before @): it "
        "would be sent to DNS. 422 INVALID_TARGET otherwise."
    )


_STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
_SPECS: dict[str, dict[str, Any]] = {
    "HttpSpec": {
        "type": "object",
        "additionalProperties": False,
        "required": ["url", "method"],
        "properties": {
            "url": {
                "type": "string",
                "description": "Supports {{config.*}}, {{secret.*}}. "
                + _target("http:// or https://"),
            },
            "method": {"enum": ["GET", "POST", "PUT", "PATCH", "DELETE"]},
            "headers": {**_STRING_MAP, "description": "Supports {{config.*}}, {{secret.*}}."},
            "body_template": {
                **_payload(
                    "Sent as the JSON body (Content-Type application/json unless headers set "
                    "one); null sends no body. With a literal Content-Type header of "
                    "application/x-www-form-urlencoded, text/* or XML (application/xml, "
                    "text/xml, application/*+xml), a string with text around its "
                    'placeholders ("name={{input.name}}") is sent as that text, each value '
                    "encoded for the type (form: percent-encoded; XML: escaped; text: as is; "
                    'a value that is not a string as compact JSON); "{{input}}" alone stays '
                    "the input as JSON.",
                    'every method but GET sends the job\'s input ("{{input}}", shown as the '
                    "default); GET sends no body.",
                ),
                "oneOf": [{"type": "object"}, {"type": "string"}],
            },
            "timeout_ms": {**_TIMEOUT, "default": 30000},
            "allowed_url_prefixes": {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_PREFIXES,
                "items": {"type": "string", "format": "uri", "pattern": "^https?://.+/$"},
                "description": "Absolute http(s) URL prefixes with a host, each ending in '/' "
                "(no user info, query, fragment, dot segments or encoded slashes; 422 "
                "INVALID_TARGET naming the entry). A job of this endpoint may then carry its "
                "own url under one of them (same scheme, host, port, and a path that starts "
                "with the prefix's), checked when the job is written and again at each "
                "delivery, where the address policy judges its host as any target's.",
            },
            "expected_status_codes": {
                "type": "array",
                "items": {"type": "integer", "minimum": 100, "maximum": 599},
                "default": [200, 201, 202, 204],
            },
        },
    },
    "KafkaSpec": {
        "type": "object",
        "additionalProperties": False,
        "required": ["bootstrap_servers", "topic"],
        "properties": {
            "bootstrap_servers": {
                "type": "string",
                "description": "Supports {{config.*}} (not {{secret.*}}: a host or port "
                "holding a secret would be sent to DNS).",
            },
            "topic": {"type": "string", "description": "Supports {{config.*}}."},
            "key_template": {
                "type": "string",
                "description": "Supports {{input.*}}, {{config.*}}.",
            },
            "value_template": {
                **_payload("Sent as the record's JSON value.", 'the job\'s input ("{{input}}").'),
                "default": "{{input}}",
            },
            "headers": {
                **_STRING_MAP,
                "description": "Supports {{config.*}}, {{secret.*}} and, as in the "
                "specification's example, {{input.*}}.",
            },
            "acks": {"enum": ["0", "1", "all"], "default": "all"},
            "timeout_ms": {**_TIMEOUT, "default": 10000},
        },
    },
    "RedisStreamSpec": {
        "type": "object",
        "additionalProperties": False,
        "required": ["redis_url", "stream"],
        "properties": {
            "redis_url": {
                "type": "string",
                "description": "Supports {{config.*}}, {{secret.*}}. "
                + _target("redis://, rediss:// or unix://", host="")
                + " Query parameters allowed: "
                + ", ".join(REDIS_URL_PARAMETERS)
                + " (any other: 422 INVALID_TARGET naming it).",
            },
            "stream": {"type": "string", "description": "Supports {{config.*}}."},
            "fields_template": {
                "type": "object",
                "minProperties": 1,
                "description": "Supports {{input.*}}, {{config.*}}, {{secret.*}}. One entry "
                "field per key; a value that is not a string is sent as compact JSON. Without "
                "it: one field, input, holding the job's input as compact JSON.",
                "default": {"input": "{{input}}"},
            },
            "max_len": {
                "oneOf": [
                    {"type": "integer", "minimum": 1},
                    {"type": "string", "description": "One {{config.*}} placeholder."},
                ]
            },
            "approximate_trimming": {"type": "boolean", "default": True},
            "timeout_ms": {**_TIMEOUT, "default": 3000},
        },
    },
}
_SIGNING_SECRET = {
    "type": "string",
    "maxLength": 100,
    "description": "Name of a secret whose value is whsec_<base64 key>: deliveries carry "
    "Standard Webhooks webhook-id, webhook-timestamp and webhook-signature (HTTP and Kafka "
    "headers, Redis Stream fields).",
}
_MAX_CONCURRENT = {
    "type": "integer",
    "minimum": 1,
    "maximum": MAX_CONCURRENT,
    "description": "How many of this endpoint's deliveries one worker runs at once (default: "
    "TE_WORKER_ENDPOINT_SHARE of TE_WORKER_MAX_CONCURRENT); flow_control.max_concurrency "
    "limits all workers together.",
}
for _spec in _SPECS.values():
    _spec["properties"]["signing_secret"] = _SIGNING_SECRET
    _spec["properties"]["max_concurrent"] = _MAX_CONCURRENT
_SPEC_ONE_OF = {"oneOf": [schema_ref(n) for n in _SPECS]}
_WRITABLE = {
    "type": {"enum": list(ENDPOINT_TYPES)},
    "payload_spec": _REF,
    "config": _REF,
    "spec": {**_SPEC_ONE_OF, "description": "Validated by type; see HttpSpec, KafkaSpec, ..."},
    "retry_policy": _RETRY,
    "flow_control": {
        "type": "object",
        "additionalProperties": False,
        "description": "Limits enforced across all workers (shown only when set). "
        "rate_limit: at most `limit` deliveries per `period_ms` (a token bucket holding up "
        "to `limit`, full when the limit is first set); max_concurrency: at most this many "
        "executions RUNNING at once; max_concurrency_per_key: at most this many executions "
        "of one job concurrency_key running at once (the others wait for room; keys take "
        "turns). A change applies at each key's next settle (an execution of it ending); "
        "with the per-key limit removed, a key's waiting executions go 100 at each of its "
        "ends.",
        "properties": {
            "rate_limit": {
                "type": "object",
                "additionalProperties": False,
                "required": ["limit", "period_ms"],
                "properties": {
                    "limit": {"type": "integer", "minimum": 1, "maximum": 100000},
                    "period_ms": {"type": "integer", "minimum": 1, "maximum": 86400000},
                },
            },
            "max_concurrency": {"type": "integer", "minimum": 1, "maximum": 10000},
            "max_concurrency_per_key": {"type": "integer", "minimum": 1, "maximum": 10000},
        },
    },
    "ordering": {
        "type": "object",
        "additionalProperties": False,
        "description": "What an ordering key does when its head ends FAILED (shown only when "
        "set; default skip): skip, the key's next execution starts; block, the key waits "
        "until the failed execution is retried (POST /executions/{id}/retry) or the key is "
        "skipped (POST /endpoints/{name}/ordering-keys/{key}/skip).",
        "properties": {"on_failure": {"enum": list(ORDERING_ON_FAILURE)}},
    },
    "on_success": {**_REF, "description": "Default on_success callback endpoint of its jobs."},
    "on_failure": {**_REF, "description": "Default on_failure callback endpoint of its jobs."},
    "auto_pause_after_ms": {
        "type": ["integer", "null"],
        "minimum": MIN_AUTO_PAUSE_AFTER_MS,
        "maximum": MAX_AUTO_PAUSE_AFTER_MS,
        "default": DEFAULT_AUTO_PAUSE_AFTER_MS,
        "description": "How long every attempt may fail before the endpoint pauses itself "
        "(paused_reason FAILING); judged by the scheduler's housekeeper about once a "
        "minute. Default five days (omitted); null: never for failing (a 410 Gone still "
        "pauses an HTTP endpoint).",
    },
}
_UNPROCESSABLE = (
    "INVALID_PAYLOAD_SPEC_REF or INVALID_CONFIG_REF: the named payload spec or config does "
    "not exist. INVALID_TARGET: spec.url or spec.redis_url can never be delivered to (not an "
    "absolute URL of the transport's schemes), names a secret in its host or port, or "
    "(redis_url) sets a query parameter not allowed. TEMPLATE_RESOLUTION_FAILED: a "
    "placeholder "
    "whose namespace is unknown or not "
    "supported by its field, {{config.*}} without a config, or {{secret.*}} naming a secret "
    "that does not exist. INVALID_CALLBACK: on_success / on_failure names no endpoint. "
    "INVALID_SIGNING_SECRET: spec.signing_secret names no secret, or one whose value is not "
    "whsec_ + the base64 of a 24-64 byte key."
)

_LIVE_JOBS = (
    "live jobs use this endpoint (ACTIVE cron jobs, jobs with an execution not yet "
    "terminal), or name it as their on_success / on_failure callback, or a live batch names "
    "it as on_complete, or another endpoint names it as a default callback, or a topic "
    "names it; they are named. Finished and retired jobs do not block."
)
_SHOWN = {
    **_WRITABLE,
    "retry_policy": {**_RETRY, "required": list(RETRY_DEFAULTS)},
    "paused_at": {
        **TIMESTAMP,
        "description": "Set while paused (POST .../pause, or by the endpoint itself); else null.",
    },
    "paused_reason": {
        "enum": [*(r.value for r in PausedReason), None],
        "description": "Why it is paused: GONE (an HTTP delivery was answered 410 Gone), "
        "FAILING (every attempt failed for longer than auto_pause_after_ms), OPERATOR (POST "
        ".../pause); null while not paused. A pause keeps the reason it began with.",
    },
    "held_until": {
        **TIMESTAMP,
        "description": "Set while a 429/503 Retry-After (capped at one hour) holds the "
        "endpoint back; else null.",
    },
}


def _with_conflict(built: Operation, description: str) -> Operation:
    path, method, op = built
    op["responses"]["409"] = response_ref("Conflict", description)
    return path, method, op


_PAUSE = (
    "Pause: no execution of the endpoint is claimed (they wait QUEUED/RETRYING and stay "
    "cancellable) until resumed; cron ticks keep materializing. paused_reason OPERATOR. "
    "Idempotent: the first paused_at and its reason stay."
)
_RESUME = (
    "Resume a paused endpoint, whatever paused it (idempotent); paused_reason becomes null. "
    "A Retry-After hold is not lifted."
)

ENDPOINTS = crud_fragment(
    "endpoint",
    properties=_SHOWN,
    writable=_WRITABLE,
    required=["type", "spec"],
    conflict=_LIVE_JOBS,
    unprocessable=_UNPROCESSABLE,
)
ENDPOINTS["schemas"].update(_SPECS)
_LIST = ENDPOINTS["paths"]["/endpoints"]["get"]
_LIST["summary"] = "List endpoints, newest first (cursor pagination), optionally filtered."
# New lists and dicts: the collection fragments share theirs.
_LIST["parameters"] = [
    *_LIST["parameters"],
    {
        **query_param("paused", {"enum": ["true", "false"]}),
        "description": "true: only paused endpoints (paused_at set); false: only the others.",
    },
    {
        **query_param("health", {"enum": [h.value for h in Health]}),
        "description": "Only endpoints with this health, the one GET /overview shows: their "
        "executions of the last 24 hours (IDLE: none).",
    },
]
_LIST["responses"] = {
    **_LIST["responses"],
    "400": {
        **_LIST["responses"]["400"],
        "description": "INVALID_REQUEST: bad limit, cursor, paused or health.",
    },
}
_SCOPE_FOR_TEMPLATES = (
    "INSUFFICIENT_SCOPE: the key's scope does not allow the route, or the definition's "
    "templates reference {{secret.*}} and the key is not 'admin' (whoever picks where a "
    "secret is sent can read it there); nothing is written."
)
for _path, _method in (("/endpoints", "post"), ("/endpoints/{name}", "put")):
    ENDPOINTS["paths"][_path][_method]["responses"]["403"] = {
        "$ref": "#/components/responses/Forbidden",
        "description": _SCOPE_FOR_TEMPLATES,
    }
_BLOCKED_KEYS = (
    "The endpoint's blocked ordering keys, by key (cursor pagination): keys whose head "
    "ended FAILED while the endpoint's ordering.on_failure is block, each with the failed "
    "execution it waits on and since when. state: blocked, the one state listed (the "
    "default)."
)
_SKIP_KEY = (
    "Unblock a blocked ordering key: the failed execution stays FAILED and the key's next "
    "execution starts. Percent-encode the key in the path."
)
ENDPOINTS["paths"].update(
    paths(
        operation("POST", "/endpoints/{name}/pause", "pauseEndpoint", "Endpoint", _PAUSE),
        operation("POST", "/endpoints/{name}/resume", "resumeEndpoint", "Endpoint", _RESUME),
        operation(
            "GET",
            "/endpoints/{name}/ordering-keys",
            "listOrderingKeys",
            "OrderingKeyPage",
            _BLOCKED_KEYS,
            paged=True,
            query=(query_param("state", {"enum": list(ORDERING_KEY_STATES)}),),
        ),
        _with_conflict(
            operation(
                "POST",
                "/endpoints/{name}/ordering-keys/{key}/skip",
                "skipOrderingKey",
                "OrderingKeySkipped",
                _SKIP_KEY,
            ),
            "ORDERING_KEY_NOT_BLOCKED: the key is not blocked (never was, or a retry or a "
            "skip unblocked it already).",
        ),
    )
)
ENDPOINTS["schemas"].update(
    {
        "OrderingKey": {
            "type": "object",
            "required": ["key", "execution_id", "since"],
            "properties": {
                "key": {"type": "string"},
                "execution_id": {
                    "type": "string",
                    "description": "The failed head the key waits on.",
                },
                "since": {**TIMESTAMP, "description": "When the key was blocked."},
            },
        },
        "OrderingKeyPage": page_of("OrderingKey"),
        "OrderingKeySkipped": {
            "type": "object",
            "required": ["endpoint", "key", "state"],
            "properties": {
                "endpoint": {"type": "string"},
                "key": {"type": "string"},
                "state": {"enum": ["released"]},
            },
        },
    }
)
