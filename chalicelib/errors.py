"""One exception tree for the whole service.

Every error the API can return is a :class:`TaskExecutorError` subclass carrying its HTTP
status and the specification's error code; ``chalicelib.api.http`` is the single place that
turns them into the ``{"error": {...}}`` envelope. Adapters (database, dispatchers) convert
library exceptions into these at their edge, so nothing above them knows pg8000, urllib3,
kafka-python or redis.
"""

from __future__ import annotations

from typing import Any


class TaskExecutorError(Exception):
    """Base of every error the service raises on purpose."""

    status = 500
    code = "INTERNAL_ERROR"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


class ConfigurationError(TaskExecutorError):
    """A setting is missing or malformed (raised at startup or first use)."""


# -- 400 / 401 / 403 / 413 / 429 ------------------------------------------------------------


class InvalidRequest(TaskExecutorError):
    status = 400
    code = "INVALID_REQUEST"


class Unauthorized(TaskExecutorError):
    status = 401
    code = "UNAUTHORIZED"


class Forbidden(TaskExecutorError):
    """A valid API key whose scope does not allow the route (a read key on a POST, a write
    key on key administration)."""

    status = 403
    code = "INSUFFICIENT_SCOPE"


class RouteNotFound(TaskExecutorError):
    """No such route (not in the spec's table; the envelope is kept for every error)."""

    status = 404
    code = "ROUTE_NOT_FOUND"


class MethodNotAllowed(TaskExecutorError):
    status = 405
    code = "METHOD_NOT_ALLOWED"


class PayloadTooLarge(TaskExecutorError):
    status = 413
    code = "PAYLOAD_TOO_LARGE"


class UnsupportedMediaType(TaskExecutorError):
    status = 415
    code = "UNSUPPORTED_MEDIA_TYPE"


class RateLimited(TaskExecutorError):
    status = 429
    code = "RATE_LIMITED"

    def __init__(self, message: str, *, retry_after_sec: int) -> None:
        super().__init__(message, retry_after_sec=retry_after_sec)
        self.retry_after_sec = retry_after_sec


# -- 404 -----------------------------------------------------------------------------------


class NotFound(TaskExecutorError):
    status = 404


class PayloadSpecNotFound(NotFound):
    code = "PAYLOAD_SPEC_NOT_FOUND"


class ConfigNotFound(NotFound):
    code = "CONFIG_NOT_FOUND"


class SecretNotFound(NotFound):
    code = "SECRET_NOT_FOUND"


class EndpointNotFound(NotFound):
    code = "ENDPOINT_NOT_FOUND"


class JobNotFound(NotFound):
    code = "JOB_NOT_FOUND"


class ExecutionNotFound(NotFound):
    code = "EXECUTION_NOT_FOUND"


class BatchNotFound(NotFound):
    code = "BATCH_NOT_FOUND"


class OperationNotFound(NotFound):
    code = "OPERATION_NOT_FOUND"


class ApiKeyNotFound(NotFound):
    code = "API_KEY_NOT_FOUND"


class TopicNotFound(NotFound):
    code = "TOPIC_NOT_FOUND"


# -- 409 -----------------------------------------------------------------------------------


class Conflict(TaskExecutorError):
    """The resource has dependents (or already exists)."""

    status = 409
    code = "CONFLICT"


class JobNotUpdatable(TaskExecutorError):
    status = 409
    code = "JOB_NOT_UPDATABLE"


class JobNotTriggerable(TaskExecutorError):
    """POST /jobs/{id}/trigger on a job that is not an ACTIVE cron job."""

    status = 409
    code = "JOB_NOT_TRIGGERABLE"


class JobNotPausable(TaskExecutorError):
    """POST /jobs/{id}/pause or resume on a job that is not an ACTIVE cron job."""

    status = 409
    code = "JOB_NOT_PAUSABLE"


class ExecutionNotCancellable(TaskExecutorError):
    status = 409
    code = "EXECUTION_NOT_CANCELLABLE"


class ExecutionNotRetryable(TaskExecutorError):
    """POST /executions/{id}/retry on an execution that is not FAILED."""

    status = 409
    code = "EXECUTION_NOT_RETRYABLE"


class OrderingKeyNotBlocked(TaskExecutorError):
    """POST /endpoints/{name}/ordering-keys/{key}/skip of a key that is not blocked."""

    status = 409
    code = "ORDERING_KEY_NOT_BLOCKED"


class OperationNotRunning(TaskExecutorError):
    """POST /operations/{id}/abort on an operation that ended DONE or FAILED."""

    status = 409
    code = "OPERATION_NOT_RUNNING"


class InvalidTransition(TaskExecutorError):
    """An execution status change the transition table does not allow."""

    status = 409
    code = "INVALID_TRANSITION"


# -- 422 -----------------------------------------------------------------------------------


class Unprocessable(TaskExecutorError):
    status = 422
    code = "INVALID_REQUEST"


class InvalidCron(Unprocessable):
    code = "INVALID_CRON"


class InvalidSchema(Unprocessable):
    code = "INVALID_SCHEMA"


class InvalidPayloadSpecRef(Unprocessable):
    code = "INVALID_PAYLOAD_SPEC_REF"


class InvalidConfigRef(Unprocessable):
    code = "INVALID_CONFIG_REF"


class InputValidationFailed(Unprocessable):
    code = "INPUT_VALIDATION_FAILED"


class InvalidCallback(Unprocessable):
    """A callback names an endpoint that does not exist, or a chain deeper than allowed."""

    code = "INVALID_CALLBACK"


class BatchRejected(Unprocessable):
    """An atomic batch with an invalid item: nothing is written; ``items`` lists why."""

    code = "BATCH_REJECTED"

    def __init__(self, message: str, *, items: list[dict[str, Any]]) -> None:
        super().__init__(message, items=items)
        #: Shown in the error envelope next to code and message.
        self.public_fields = {"items": items}


class TemplateResolutionFailed(Unprocessable):
    code = "TEMPLATE_RESOLUTION_FAILED"


class InvalidSigningSecret(Unprocessable):
    """``spec.signing_secret`` names no secret, or one whose value is not a whsec_ key (the
    message never quotes the value)."""

    code = "INVALID_SIGNING_SECRET"


class InvalidTarget(Unprocessable):
    """An endpoint's target URL (``spec.url``, ``spec.redis_url``) can never be delivered
    to: not an absolute URL of a scheme its transport speaks. The message names the field."""

    code = "INVALID_TARGET"


class ValidationFailed(Unprocessable):
    """A well-formed body whose fields break a rule (wrong type, missing field, bad value)."""

    status = 400
    code = "INVALID_REQUEST"


# -- infrastructure ------------------------------------------------------------------------


class DatabaseError(TaskExecutorError):
    """The database failed in a way a retry of the whole operation will not fix."""


class DatabaseUnavailable(DatabaseError):
    """The connection dropped or could not be made; the next use reconnects."""

    status = 503
    code = "DATABASE_UNAVAILABLE"


class TransactionRetriesExhausted(DatabaseError):
    """SQLSTATE 40001 kept coming back after every retry."""

    status = 503
    code = "DATABASE_CONTENTION"


class UniqueViolation(DatabaseError):
    """A unique constraint rejected a write (SQLSTATE 23505)."""

    status = 409
    code = "CONFLICT"


class ForeignKeyViolation(DatabaseError):
    """A foreign key rejected a write or delete (SQLSTATE 23503)."""

    status = 409
    code = "CONFLICT"


class InvalidData(DatabaseError):
    """The database refused a value from the request (SQLSTATE class 22): a client error."""

    status = 400
    code = "INVALID_REQUEST"


class ProcessDown(TaskExecutorError):
    """GET /health: a kind of process (worker, scheduler) has run in the deployment and none
    of it is live now; ``kinds`` names them. Their due work waits until one runs again."""

    status = 503
    code = "PROCESS_DOWN"

    def __init__(self, message: str, *, kinds: list[str]) -> None:
        super().__init__(message, kinds=kinds)
        #: Shown in the error envelope next to code and message.
        self.public_fields = {"kinds": kinds}


class LoopDown(TaskExecutorError):
    """GET /health: a recent heartbeat reports a background loop down. ``loops`` lists
    them by loop name, phase, since when and the last error's type; not by process (the
    route needs no key, and process names carry host names)."""

    status = 503
    code = "LOOP_DOWN"

    def __init__(self, message: str, *, loops: list[dict[str, Any]]) -> None:
        super().__init__(message, loops=loops)
        #: Shown in the error envelope next to code and message.
        self.public_fields = {"loops": loops}


class SecretKeyError(TaskExecutorError):
    """A secret cannot be encrypted or decrypted with the configured keys."""

    status = 500
    code = "INTERNAL_ERROR"
