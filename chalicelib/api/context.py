"""What the routes need of the process they run in, and the app that carries it.

The composition root (:mod:`chalicelib.wiring.api`) builds an :class:`ApiContext` per
process and hands it to the :class:`ApiApp`; a route reaches it through its resource
(``resource.resource.services.job_service()``), so no route builds a service or reads a setting,
and the API imports nothing of the root.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Protocol

from chalice import Chalice

if TYPE_CHECKING:
    from chalicelib.api.auth import Authenticator, RateLimiter
    from chalicelib.domain.trace_context import TraceContext
    from chalicelib.services.api_keys import ApiKeyService
    from chalicelib.services.batches import BatchService
    from chalicelib.services.configs import ConfigService
    from chalicelib.services.dead_letters import DeadLetterService
    from chalicelib.services.endpoints import EndpointService
    from chalicelib.services.executions import ExecutionService
    from chalicelib.services.jobs.service import JobService
    from chalicelib.services.jobs.status import JobStatusService
    from chalicelib.services.metrics import MetricsService
    from chalicelib.services.operations import OperationService
    from chalicelib.services.overview import OverviewService
    from chalicelib.services.payload_specs import PayloadSpecService
    from chalicelib.services.secrets import SecretService
    from chalicelib.services.topics import TopicService


class ApiContext(Protocol):
    """The API process's collaborators: one service per resource, the guards, the limits."""

    @property
    def max_body_bytes(self) -> int: ...

    @property
    def profile(self) -> str: ...

    def served(self) -> None:
        """A request is being served: the process's heartbeat, when one is due."""

    def guards(self) -> tuple[Authenticator, RateLimiter]: ...

    def traced(
        self, name: str, incoming: TraceContext | None
    ) -> AbstractContextManager[TraceContext | None]:
        """The API call ``name`` as a span of ``incoming``'s trace where tracing is on
        (:mod:`chalicelib.tracing`); yields the trace context its jobs keep."""

    def job_service(self) -> JobService: ...

    def batch_service(self) -> BatchService: ...

    def job_status_service(self) -> JobStatusService: ...

    def execution_service(self) -> ExecutionService: ...

    def dead_letter_service(self) -> DeadLetterService: ...

    def operation_service(self) -> OperationService: ...

    def endpoint_service(self) -> EndpointService: ...

    def config_service(self) -> ConfigService: ...

    def payload_spec_service(self) -> PayloadSpecService: ...

    def secret_service(self) -> SecretService: ...

    def topic_service(self) -> TopicService: ...

    def api_key_service(self) -> ApiKeyService: ...

    def metrics_service(self) -> MetricsService: ...

    def health_service(self) -> MetricsService: ...

    def overview_service(self) -> OverviewService: ...


class ApiApp(Chalice):
    """The Chalice app with the :class:`ApiContext` its routes use (see :meth:`use`)."""

    def __init__(self, app_name: str, context: ApiContext) -> None:
        super().__init__(app_name=app_name)
        self.context = context

    def use(self, context: ApiContext) -> None:
        """Serve from ``context`` from now on (tests: a new process; Chalice cannot register
        the blueprints on a second app in one process)."""
        self.context = context
