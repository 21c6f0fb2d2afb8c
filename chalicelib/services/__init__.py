"""Use cases behind the API, built per process from :mod:`chalicelib.wiring`.

Route handlers call the factories below (:func:`job_service`, :func:`config_service`, ...);
each builds its service on first use (never at import) with the API's database pool and,
where a service needs them, the service clock or the secret keyring. Services are cheap
values; the pool is cached, and so is the job service (it remembers endpoints).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from chalicelib.crypto import SecretBox
    from chalicelib.services.api_keys import ApiKeyService
    from chalicelib.services.batches import BatchService
    from chalicelib.services.configs import ConfigService
    from chalicelib.services.dead_letters import DeadLetterService
    from chalicelib.services.endpoints import EndpointService
    from chalicelib.services.executions import ExecutionService
    from chalicelib.services.jobs.service import JobService
    from chalicelib.services.jobs.status import JobStatusService
    from chalicelib.services.metrics import MetricsService
    from chalicelib.services.overview import OverviewService
    from chalicelib.services.payload_specs import PayloadSpecService
    from chalicelib.services.secrets import SecretService

_lock = threading.Lock()
#: The job service of the API's pool, replaced with the pool (tests replace it).
_job_service: JobService | None = None


def job_service() -> JobService:
    """One per database pool: it holds the endpoints POST /jobs has read (its fast path)."""
    from chalicelib import wiring
    from chalicelib.services.jobs.service import JobService

    global _job_service
    db = wiring.database("api")
    with _lock:
        if _job_service is None or _job_service.db is not db:
            wakeup_notify = wiring.settings().wakeup_notify
            _job_service = JobService(db, wiring.utcnow, wakeup_notify=wakeup_notify)
        return _job_service


def batch_service() -> BatchService:
    from chalicelib import wiring
    from chalicelib.services.batches import BatchService

    return BatchService(
        wiring.database("api"), wiring.utcnow, wakeup_notify=wiring.settings().wakeup_notify
    )


def job_status_service() -> JobStatusService:
    from chalicelib import wiring
    from chalicelib.services.jobs.status import JobStatusService

    return JobStatusService(wiring.database("api"), wiring.utcnow)


def execution_service() -> ExecutionService:
    from chalicelib import wiring
    from chalicelib.services.executions import ExecutionService

    return ExecutionService(wiring.database("api"))


def dead_letter_service() -> DeadLetterService:
    from chalicelib import wiring
    from chalicelib.services.dead_letters import DeadLetterService

    return DeadLetterService(wiring.database("api"), wakeup_notify=wiring.settings().wakeup_notify)


def endpoint_service() -> EndpointService:
    from chalicelib import wiring
    from chalicelib.services.endpoints import EndpointService

    return EndpointService(wiring.database("api"), box=_reading_box)


def config_service() -> ConfigService:
    from chalicelib import wiring
    from chalicelib.services.configs import ConfigService

    return ConfigService(wiring.database("api"))


def payload_spec_service() -> PayloadSpecService:
    from chalicelib import wiring
    from chalicelib.services.payload_specs import PayloadSpecService

    return PayloadSpecService(wiring.database("api"))


def _secret_box() -> SecretBox:
    """The keyring for writes: 500 naming TE_SECRET_ENCRYPTION_KEY when it is not set."""
    from chalicelib import wiring
    from chalicelib.crypto import SecretBox

    _, older = wiring.encryption_keys()
    return SecretBox(wiring.require_encryption_key(), older)


def _reading_box() -> SecretBox:
    """The keyring for reads (checking a signing secret's form); may have no current key."""
    from chalicelib import wiring
    from chalicelib.crypto import SecretBox

    current, older = wiring.encryption_keys()
    return SecretBox(current, older)


def secret_service() -> SecretService:
    from chalicelib import wiring
    from chalicelib.services.secrets import SecretService

    return SecretService(wiring.database("api"), _secret_box)


def api_key_service() -> ApiKeyService:
    from chalicelib import wiring
    from chalicelib.services.api_keys import ApiKeyService

    return ApiKeyService(wiring.database("api"))


def metrics_service() -> MetricsService:
    from chalicelib import wiring
    from chalicelib.services.metrics import MetricsService

    return MetricsService(wiring.database("api"), wiring.utcnow)


def overview_service() -> OverviewService:
    from chalicelib import wiring
    from chalicelib.services.overview import OverviewService

    return OverviewService(wiring.database("api"), wiring.utcnow)
