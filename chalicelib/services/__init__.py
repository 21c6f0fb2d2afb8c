"""Use cases behind the API, built per process from :mod:`chalicelib.wiring`.

Route handlers call :func:`job_service`, :func:`job_status_service` and
:func:`execution_service`; each builds its service on first use (never at import) with the
API's database pool and the service clock. Services are cheap values; the pool is cached.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from chalicelib.services.executions import ExecutionService
    from chalicelib.services.job_status import JobStatusService
    from chalicelib.services.jobs import JobService


def job_service() -> JobService:
    from chalicelib import wiring
    from chalicelib.services.jobs import JobService

    return JobService(
        wiring.database("api"), wiring.utcnow, wakeup_notify=wiring.settings().wakeup_notify
    )


def job_status_service() -> JobStatusService:
    from chalicelib import wiring
    from chalicelib.services.job_status import JobStatusService

    return JobStatusService(wiring.database("api"), wiring.utcnow)


def execution_service() -> ExecutionService:
    from chalicelib import wiring
    from chalicelib.services.executions import ExecutionService

    return ExecutionService(wiring.database("api"))
