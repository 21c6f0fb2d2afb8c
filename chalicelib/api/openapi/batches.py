"""OpenAPI for batches: ``POST /jobs/batch``, ``GET /batches/{id}``, its jobs, its cancel."""

from __future__ import annotations

from typing import Any

from chalicelib.api.openapi.common import (
    TIMESTAMP,
    TRACE_CONTEXT,
    operation,
    paths,
    query_param,
    schema_ref,
)

_EXECUTION_STATUS = {
    "type": "string",
    "enum": ["PENDING", "QUEUED", "RUNNING", "RETRYING", "SUCCESS", "FAILED", "CANCELLED"],
}
_COUNT = {"type": "integer", "minimum": 0}
_CREATE = (
    "Up to 1,000 job requests (any trigger, the fields and checks of POST /jobs) created in "
    "one transaction with multi-row statements. Each item is answered in order: status 201 "
    "with the job, 200 with the existing job (idempotency key already used, in this batch "
    "or before) or a 4xx status with the error that item would get from POST /jobs. With "
    "atomic true, any invalid item makes the whole request 422 BATCH_REJECTED (items listed "
    "under error.items) with nothing written. More than 1,000 items: 413 naming the limit. "
    "on_complete names an endpoint that gets one IMMEDIATE job when every child execution "
    "is terminal (422 INVALID_CALLBACK if it does not exist)."
)
_GET = (
    "Total, counts of the child executions by status, and the status: RUNNING until every "
    "child execution is terminal, then COMPLETED with completed_at. Derived from an index "
    "on the executions, never from a counter row."
)
_CANCEL = (
    "Cancels every PENDING/QUEUED/RETRYING child execution (and retires the batch's CRON "
    "jobs) in one transaction; RUNNING children finish. Idempotent: a repeat cancels 0."
)

_ITEM = {
    "type": "object",
    "required": ["status"],
    "properties": {
        "status": {"type": "integer", "description": "201, 200, or the item's 4xx."},
        "job": schema_ref("Job"),
        "error": {
            "type": "object",
            "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
        },
    },
}

_BATCH = {
    "type": "object",
    "required": ["batch_id", "status", "total", "counts", "created_at"],
    "properties": {
        "batch_id": {"type": "string", "pattern": "^batch_"},
        "status": {"type": "string", "enum": ["RUNNING", "COMPLETED"]},
        "total": {**_COUNT, "description": "Jobs this batch created."},
        "counts": {
            "type": "object",
            "description": "Child executions by status (every status, 0 included).",
            "additionalProperties": _COUNT,
        },
        "on_complete": {"type": ["string", "null"]},
        "created_at": TIMESTAMP,
        "completed_at": TIMESTAMP,
    },
}

_ONE = "/batches/{batch_id}"

BATCHES: dict[str, Any] = {
    "paths": paths(
        operation(
            "POST",
            "/jobs/batch",
            "createBatch",
            "BatchCreated",
            _CREATE,
            errors=("Unprocessable",),
            body="BatchCreate",
            parameters=list(TRACE_CONTEXT),
        ),
        operation("GET", _ONE, "getBatch", "Batch", _GET),
        operation(
            "GET",
            f"{_ONE}/jobs",
            "listBatchJobs",
            "JobPage",
            "The batch's jobs, newest first; status filters by execution status.",
            paged=True,
            query=(query_param("status", _EXECUTION_STATUS),),
        ),
        operation("POST", f"{_ONE}/cancel", "cancelBatch", "BatchCancelled", _CANCEL),
    ),
    "schemas": {
        "BatchCreate": {
            "type": "object",
            "required": ["jobs"],
            "additionalProperties": False,
            "properties": {
                "jobs": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": 1000,
                    "items": schema_ref("JobCreate"),
                },
                "atomic": {"type": "boolean", "default": False},
                "on_complete": {"type": ["string", "null"]},
            },
        },
        "BatchCreated": {
            "type": "object",
            "required": ["batch_id", "items"],
            "properties": {
                "batch_id": {"type": "string", "pattern": "^batch_"},
                "items": {"type": "array", "items": _ITEM},
            },
        },
        "Batch": _BATCH,
        "BatchCancelled": {
            "type": "object",
            "properties": {
                "cancelled": {**_COUNT, "description": "Child executions cancelled now."},
                "retired": {**_COUNT, "description": "CRON jobs of the batch retired now."},
                "batch": schema_ref("Batch"),
            },
        },
    },
}
