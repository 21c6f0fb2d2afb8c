"""OpenAPI for ``/jobs``: create, list, get, update, cancel, trigger, status and versions."""

from __future__ import annotations

from typing import Any

from chalicelib.api.openapi.common import (
    TIMESTAMP,
    TRACE_CONTEXT,
    operation,
    page_of,
    paths,
    query_param,
    schema_ref,
)
from chalicelib.api.openapi.endpoints import RETRY_POLICY_SCHEMA

_TRIGGER = {"type": "string", "enum": ["IMMEDIATE", "DELAYED", "CRON"]}
_JOB_STATUS = {"type": "string", "enum": ["ACTIVE", "RETIRED"]}
_SUMMARY = {"oneOf": [schema_ref("ExecutionSummary"), {"type": "null"}]}
_COUNT = {"type": "integer"}
_SCHEDULE_ERROR = {
    "type": "string",
    "description": "Set on a cron job the scheduler could not schedule (its row cannot be "
    "evaluated): why. The job has no next run until it is replaced (PUT).",
}
_MS = {"type": ["integer", "null"]}
_CALLBACK = {
    "type": "string",
    "description": (
        "Endpoint that gets an IMMEDIATE callback job when the execution ends SUCCESS "
        "(on_success) or FAILED (on_failure); default: the endpoint's own. Input: "
        "execution_id, job_id, endpoint, status, attempt_count, output or error, batch_id. "
        "422 INVALID_CALLBACK if it does not exist or the chain is deeper than 3."
    ),
}

#: A one-shot job's own delivery settings (chalicelib/domain/job_delivery.py).
_DELIVERY: dict[str, Any] = {
    "retry_policy": {
        **RETRY_POLICY_SCHEMA,
        "description": "IMMEDIATE and DELAYED: the endpoint's retry policy fields; each one "
        "given overrides the endpoint's for this job (max_attempts sets the execution's).",
    },
    "timeout_ms": {
        "type": "integer",
        "minimum": 1,
        "maximum": 300000,
        "description": "IMMEDIATE and DELAYED: over the endpoint's spec.timeout_ms.",
    },
    "url": {
        "type": "string",
        "format": "uri",
        "description": "IMMEDIATE and DELAYED, an HTTP endpoint with allowed_url_prefixes: "
        "delivered here instead of spec.url, with the endpoint's method, headers, template "
        "and signing. 422 INVALID_TARGET naming 'url' when it matches no prefix or the "
        "endpoint has none; never user info, dot segments, encoded slashes or another port.",
    },
    "expire_after": {
        "type": "string",
        "pattern": "^([0-9]+(ms|s|m|h|d))+$",
        "examples": ["90s", "1h30m"],
        "description": "IMMEDIATE and DELAYED: a positive duration (units ms, s, m, h, d). "
        "An execution not started that long after its due time ends FAILED with error type "
        "EXPIRED, never delivered.",
    },
}

_INPUT = {
    "description": "Any JSON value (an object, an array, a string, a number, a boolean); "
    "none or null is no input ({}). Without a body_template it is sent as that JSON.",
}
_HEADERS = {
    "type": "object",
    "additionalProperties": {"type": "string"},
    "maxProperties": 32,
    "description": "Literal values (no templates) sent with each delivery: HTTP request "
    "headers (over the endpoint's of the same name, in any case), Kafka record headers, "
    "Redis Stream fields header:<name>. traceparent and tracestate here are the job's W3C "
    "trace context (a malformed traceparent is ignored). 400 naming the header: a name that "
    "is not an HTTP token, a value with CR, LF or NUL, a name the service owns "
    "(X-Task-Executor-*, Idempotency-Key, webhook-*, Host, Content-Length, "
    "Transfer-Encoding, Connection), more than 32 headers or 8 KiB in all. Not shown back "
    "(they may carry credentials; values of credential headers are redacted from attempts).",
}

_ORDERING_KEY = {
    "type": "string",
    "minLength": 1,
    "maxLength": 200,
    "description": "Executions of the endpoint sharing this key start one at a time, in the "
    "order their jobs were created (DELAYED and CRON: by due time, then creation; a cron "
    "job's ticks and runs now each at its own time; a new version keeps the key); the next "
    "starts once the previous ended (SUCCESS, FAILED or CANCELLED). "
    "Retries hold the key. The endpoint's ordering.on_failure says whether a failed head "
    "lets the next start (skip) or waits for an operator (block).",
}
_CONCURRENCY_KEY = {
    "type": "string",
    "minLength": 1,
    "maxLength": 200,
    "description": "Where the endpoint's flow_control sets max_concurrency_per_key, at most "
    "that many executions of the endpoint sharing this key run at once, across all workers; "
    "the others wait for room, by due time then creation, and keys take turns (an execution "
    "released when its key has room queues behind what other keys already have due). A "
    "retry in its backoff keeps its room. Accepted on any endpoint, it limits only where "
    "the endpoint sets a limit (checked when each execution is created). Not with "
    "ordering_key (400): an ordering key already runs its executions one at a time.",
}
_CREATE_OK = "Existing job (idempotency_key already used for this endpoint)."
_FAN_OUT_OK = "With topic: the jobs the key already holds on the topic's endpoints (JobFanOut)."
_CREATE_RULES = (
    "IMMEDIATE: execution QUEUED now. DELAYED: execution PENDING until run_at (a past run_at "
    "fires on the promoter's next pass), given as run_at or as delay (the server's time plus "
    "the delay), exactly one of them. CRON: no execution until the first tick. 404 "
    "ENDPOINT_NOT_FOUND; 422 INVALID_CRON or INPUT_VALIDATION_FAILED. With topic instead of "
    "endpoint (exactly one of the two, 400 otherwise): one job per endpoint of the topic in "
    "one transaction, each input checked against its endpoint's payload spec; any refusal "
    "refuses the whole request and nothing is written. 404 TOPIC_NOT_FOUND. url is refused "
    "with topic (400). The key deduplicates per topic: each job holds "
    "topic:<topic>:<key>, and a repeat answers 200 with those jobs, creating none."
)
_CANCEL = (
    "CRON: retire. One-shot: cancel its PENDING/QUEUED/RETRYING execution. Idempotent: "
    "already retired or cancelled answers 200 with the current state; 409 "
    "EXECUTION_NOT_CANCELLABLE when the execution is RUNNING, SUCCESS or FAILED."
)
_GET = "Get a job with its (latest) execution; long-poll with Prefer: wait=N."
_UPDATE = "New version of a CRON job, or a DELAYED job moved to a new time."
_UPDATE_RULES = (
    "CRON (body JobUpdate): a new version with a new job_id; the old version becomes RETIRED. "
    "DELAYED (body JobReschedule): the job keeps its job_id and execution and moves to the "
    "new run_at while its execution is PENDING or QUEUED (the old time never fires); it "
    "takes the next version, and the version it replaces is kept as a RETIRED job of its "
    "own (listed by GET /jobs/{job_id}/versions). 409 INVALID_TRANSITION once its execution "
    "has started or ended; 409 JOB_NOT_UPDATABLE for an IMMEDIATE job or a RETIRED version."
)
_DURATION = {
    "type": "string",
    "pattern": "^([0-9]+d)?([0-9]+h)?([0-9]+m)?([0-9]+s)?([0-9]+ms)?$",
    "examples": ["250ms", "90s", "15m", "1h30m", "2d"],
    "description": "A positive duration: parts <digits><unit>, units d, h, m, s, ms, each at "
    "most once, largest first. Instead of run_at (exactly one of them): run_at is the "
    "server's time plus this.",
}
_FILTERS = (
    query_param("endpoint", {"type": "string"}),
    query_param("trigger", _TRIGGER),
    query_param("status", _JOB_STATUS),
    {
        **query_param("idempotency_key", {"type": "string", "maxLength": 255}),
        "description": "With endpoint: the job created with this key (one item, or none).",
    },
)
_ONE = "/jobs/{job_id}"

_CREATE = operation(
    "POST",
    "/jobs",
    "createJob",
    "Job",
    _CREATE_OK,
    errors=("NotFound", "Unprocessable"),
    body="JobCreate",
    description=_CREATE_RULES,
    parameters=list(TRACE_CONTEXT),
)
_CREATED = {"oneOf": [schema_ref("Job"), schema_ref("JobFanOut")]}
_CREATE[2]["responses"]["200"]["content"]["application/json"]["schema"] = _CREATED
_CREATE[2]["responses"]["200"]["description"] = _CREATE_OK + " " + _FAN_OUT_OK
_CREATE[2]["responses"]["201"] = {
    "description": "Job created; with topic, every job of the fan-out (JobFanOut).",
    "content": _CREATE[2]["responses"]["200"]["content"],
}

_RUN_NOW = operation(
    "POST",
    f"{_ONE}/trigger",
    "triggerJob",
    "Execution",
    "Run an ACTIVE cron job now.",
    errors=("Conflict",),
    description="One extra execution, due now, with its own idempotency key (listed with "
    "the job's executions); the schedule does not move. 409 JOB_NOT_TRIGGERABLE for a "
    "one-shot or RETIRED job.",
)
_RUN_NOW[2]["responses"]["201"] = {
    "description": "Execution created.",
    "content": _RUN_NOW[2]["responses"].pop("200")["content"],
}

_PAUSE = (
    "Pause an ACTIVE cron job: no ticks until resumed (a tick materialized ahead of time is "
    "cancelled). Idempotent: the first paused_at stays. POST .../trigger still runs it "
    "once. 409 JOB_NOT_PAUSABLE for a one-shot or RETIRED job."
)
_RESUME = (
    "Resume a paused cron job (idempotent). The ticks missed while paused are skipped "
    '(the next tick is the first after now) unless the body says {"catch_up": true}. '
    "409 JOB_NOT_PAUSABLE for a one-shot or RETIRED job."
)

_UPDATE_OPERATION = operation(
    "PUT",
    _ONE,
    "updateJob",
    "Job",
    _UPDATE,
    errors=("Conflict", "Unprocessable"),
    body="JobUpdate",
    description=_UPDATE_RULES,
)
_UPDATE_OPERATION[2]["requestBody"]["content"]["application/json"]["schema"] = {
    "oneOf": [schema_ref("JobUpdate"), schema_ref("JobReschedule")]
}

JOBS: dict[str, Any] = {
    "paths": paths(
        _CREATE,
        operation(
            "GET",
            "/jobs",
            "listJobs",
            "JobPage",
            "List jobs, newest first.",
            paged=True,
            query=_FILTERS,
        ),
        operation("GET", _ONE, "getJob", "Job", _GET, wait=True),
        _UPDATE_OPERATION,
        operation("POST", f"{_ONE}/cancel", "cancelJob", "Job", _CANCEL, errors=("Conflict",)),
        _RUN_NOW,
        operation("POST", f"{_ONE}/pause", "pauseJob", "Job", _PAUSE, errors=("Conflict",)),
        operation(
            "POST",
            f"{_ONE}/resume",
            "resumeJob",
            "Job",
            _RESUME,
            errors=("Conflict",),
            body="JobResume",
        ),
        operation(
            "GET", f"{_ONE}/status", "getJobStatus", "JobStatus", "Health and 24-hour statistics."
        ),
        operation(
            "GET",
            f"{_ONE}/versions",
            "listJobVersions",
            "JobPage",
            "Version chain, oldest first.",
            paged=True,
        ),
    ),
    "schemas": {
        "JobCreate": {
            "type": "object",
            "required": ["trigger"],
            "oneOf": [{"required": ["endpoint"]}, {"required": ["topic"]}],
            "additionalProperties": False,
            "properties": {
                "endpoint": {"type": "string"},
                "topic": {
                    "type": "string",
                    "maxLength": 100,
                    "description": "Instead of endpoint: one job on each endpoint of the "
                    "topic (POST /topics), answered as JobFanOut.",
                },
                "trigger": _TRIGGER,
                "idempotency_key": {
                    "type": "string",
                    "maxLength": 255,
                    "description": "Required for IMMEDIATE and DELAYED; optional for CRON.",
                },
                "input": _INPUT,
                "run_at": {"type": "string", "format": "date-time"},
                "delay": _DURATION,
                "cron": {"type": "string", "description": "5 fields; required for CRON."},
                "timezone": {"type": "string", "description": "IANA; required for CRON."},
                "starts_at": {"type": "string", "format": "date-time"},
                "ends_at": {"type": ["string", "null"], "format": "date-time"},
                "on_success": _CALLBACK,
                "on_failure": _CALLBACK,
                "headers": _HEADERS,
                "ordering_key": _ORDERING_KEY,
                "concurrency_key": _CONCURRENCY_KEY,
                **_DELIVERY,
            },
        },
        "JobFanOut": {
            "type": "object",
            "required": ["topic", "jobs"],
            "properties": {
                "topic": {"type": "string"},
                "jobs": {
                    "type": "array",
                    "items": schema_ref("Job"),
                    "description": "One job per endpoint of the topic, in its order.",
                },
            },
        },
        "JobUpdate": {
            "type": "object",
            "additionalProperties": False,
            "minProperties": 1,
            "description": "Fields left out are carried over from the current version.",
            "properties": {
                "cron": {"type": "string"},
                "timezone": {"type": "string"},
                "input": _INPUT,
                "starts_at": {"type": "string", "format": "date-time"},
                "ends_at": {"type": ["string", "null"], "format": "date-time"},
            },
        },
        "JobReschedule": {
            "type": "object",
            "additionalProperties": False,
            "minProperties": 1,
            "maxProperties": 1,
            "description": "A DELAYED job's new time: run_at or delay, exactly one.",
            "properties": {
                "run_at": {"type": "string", "format": "date-time"},
                "delay": _DURATION,
            },
        },
        "JobResume": {
            "type": "object",
            "additionalProperties": False,
            "description": "Optional body.",
            "properties": {"catch_up": {"type": "boolean", "default": False}},
        },
        "Job": {
            "type": "object",
            "required": ["job_id", "endpoint", "endpoint_type", "trigger", "status", "version"],
            "properties": {
                "job_id": {"type": "string", "pattern": "^job_"},
                "endpoint": {"type": "string"},
                "endpoint_type": {"type": "string", "enum": ["HTTP", "KAFKA", "REDIS_STREAM"]},
                "trigger": _TRIGGER,
                "status": _JOB_STATUS,
                "version": {"type": "integer", "minimum": 1},
                "previous_version_id": {"type": "string"},
                "idempotency_key": {"type": ["string", "null"]},
                "run_at": TIMESTAMP,
                "cron": {"type": "string"},
                "timezone": {"type": "string"},
                "starts_at": TIMESTAMP,
                "ends_at": TIMESTAMP,
                "next_run_at": {
                    "type": ["string", "null"],
                    "description": "In the job's timezone with its offset.",
                },
                "input": {"description": "The job's input: any JSON value."},
                "execution": _SUMMARY,
                "latest_execution": _SUMMARY,
                "retired_at": TIMESTAMP,
                "replaced_by_id": {"type": ["string", "null"]},
                "batch_id": {"type": "string", "description": "Set on a batch's jobs."},
                "on_success": {"type": "string"},
                "on_failure": {"type": "string"},
                "parent_execution_id": {
                    "type": "string",
                    "description": "Set on a callback job: the execution it reports on.",
                },
                "paused_at": {
                    **TIMESTAMP,
                    "description": "Set while an ACTIVE cron job is paused; else null.",
                },
                "schedule_error": _SCHEDULE_ERROR,
                "ordering_key": {
                    **_ORDERING_KEY,
                    "description": f"Shown when set. {_ORDERING_KEY['description']}",
                },
                "concurrency_key": {
                    **_CONCURRENCY_KEY,
                    "type": ["string", "null"],
                    "description": f"Null when unset. {_CONCURRENCY_KEY['description']}",
                },
                **{
                    name: {**schema, "description": f"Shown when set. {schema['description']}"}
                    for name, schema in _DELIVERY.items()
                },
                "created_at": TIMESTAMP,
            },
        },
        "JobPage": page_of("Job"),
        "JobStatus": {
            "type": "object",
            "properties": {
                "job_id": {"type": "string"},
                "endpoint": {"type": "string"},
                "endpoint_type": {"type": "string"},
                "trigger": _TRIGGER,
                "status": _JOB_STATUS,
                "health": {
                    "type": "string",
                    "enum": ["HEALTHY", "DEGRADED", "FAILING", "IDLE"],
                    "description": "FAILING too when the scheduler set the job aside "
                    "(schedule_error).",
                },
                "schedule_error": _SCHEDULE_ERROR,
                "version": {"type": "integer"},
                "last_execution": {"type": ["object", "null"]},
                "active_executions": {
                    "type": "object",
                    "description": "pending = PENDING + QUEUED + RETRYING; running = RUNNING.",
                    "properties": {"pending": _COUNT, "running": _COUNT, "total": _COUNT},
                },
                "cron": {"type": ["object", "null"]},
                "stats": {
                    "type": "object",
                    "properties": {
                        "last_24h": {
                            "type": "object",
                            "properties": {
                                "total": _COUNT,
                                "succeeded": _COUNT,
                                "failed": _COUNT,
                                "avg_duration_ms": _MS,
                                "p99_duration_ms": _MS,
                            },
                        }
                    },
                },
            },
        },
    },
}
