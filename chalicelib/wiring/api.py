"""The API process: its services over the ``api`` pool, the key check and the rate limiter.

:class:`ApiRoot` is the :class:`~chalicelib.api.context.ApiContext` the routes use. Each
service is built per call (services are cheap values over a cached pool, and a new one
sees the root's clock); the authenticator and the rate limiter are built on the first
request and kept, since they hold the key cache and the token buckets, and so is what
POST /jobs remembers of the endpoints it has read (its one-statement strategy).

Each service module is imported by the method that builds it, on first use: a cold
Lambda loads only the services its first requests need (``app.py`` imports this module;
eager imports of all thirteen cost about 8 ms of every cold start).
"""

from __future__ import annotations

import threading
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from chalicelib import tracing
from chalicelib.api.auth import Authenticator, FailedAuthLimiter, RateLimiter
from chalicelib.domain.api_keys import Scope
from chalicelib.services.jobs.fastpath import KnownEndpoints
from chalicelib.wiring.process import ProcessRoot

if TYPE_CHECKING:
    from chalicelib.domain.trace_context import TraceContext
    from chalicelib.health.heartbeat import BeatWhenServing
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


class ApiRoot:
    """The API's collaborators over one :class:`ProcessRoot` (its ``api`` pool)."""

    def __init__(self, process: ProcessRoot) -> None:
        self.process = process
        self._lock = threading.Lock()
        self._guards: tuple[Authenticator, RateLimiter] | None = None
        self._known = KnownEndpoints()
        self._beat: BeatWhenServing | None = None

    @property
    def max_body_bytes(self) -> int:
        return self.process.settings.max_body_bytes

    @property
    def profile(self) -> str:
        return self.process.settings.profile

    def served(self) -> None:
        """This API process is serving a request: its heartbeat (kind ``api``) when due, on
        the ``api`` pool the request uses anyway (no connection of its own to open at a
        cold start)."""
        if self._beat is not None:
            self._beat.served()
            return
        with self._lock:
            if self._beat is None:
                # Here, not at import: the loop runtime it pulls in is no cold start's business.
                from chalicelib.health.heartbeat import (
                    API,
                    BeatWhenServing,
                    HeartbeatWriter,
                    instance_name,
                )

                p = self.process
                self._beat = BeatWhenServing(
                    HeartbeatWriter(
                        p.database("api"),
                        kind=API,
                        component=instance_name("api"),
                        region=p.settings.region,
                        clock=p.clock,
                    )
                )
        self._beat.served()

    def guards(self) -> tuple[Authenticator, RateLimiter]:
        """The process's Authenticator and RateLimiter, built on the first request."""
        with self._lock:
            if self._guards is None:
                settings = self.process.settings
                authenticator = Authenticator(
                    lookup=self._scope_of,
                    bootstrap_key=self.process.bootstrap_api_key(),
                    cache_ttl_sec=settings.api_key_cache_ttl_sec,
                    failures=FailedAuthLimiter(
                        rate=settings.failed_auth_per_sec,
                        total_rate=settings.failed_auth_total_per_sec,
                    ),
                )
                self._guards = authenticator, RateLimiter(rate=settings.rate_limit_per_sec)
            return self._guards

    def _scope_of(self, digest: bytes) -> Scope | None:
        return self.api_key_service().scope_of(digest)

    def traced(
        self, name: str, incoming: TraceContext | None
    ) -> AbstractContextManager[TraceContext | None]:
        return tracing.api_call(self.process.tracing, name, incoming)

    def job_service(self) -> JobService:
        from chalicelib.services.jobs.service import JobService

        p = self.process
        return JobService(
            p.database("api"), p.clock, wakeup_notify=p.settings.wakeup_notify, known=self._known
        )

    def batch_service(self) -> BatchService:
        from chalicelib.services.batches import BatchService

        p = self.process
        return BatchService(p.database("api"), p.clock, wakeup_notify=p.settings.wakeup_notify)

    def job_status_service(self) -> JobStatusService:
        from chalicelib.services.jobs.status import JobStatusService

        return JobStatusService(self.process.database("api"), self.process.clock)

    def execution_service(self) -> ExecutionService:
        from chalicelib.services.executions import ExecutionService

        return ExecutionService(self.process.database("api"))

    def dead_letter_service(self) -> DeadLetterService:
        from chalicelib.services.dead_letters import DeadLetterService

        p = self.process
        return DeadLetterService(p.database("api"), wakeup_notify=p.settings.wakeup_notify)

    def operation_service(self) -> OperationService:
        from chalicelib.services.operations import OperationService

        p = self.process
        return OperationService(
            p.database("api"),
            page_size=p.settings.bulk_page_size,
            wakeup_notify=p.settings.wakeup_notify,
        )

    def endpoint_service(self) -> EndpointService:
        from chalicelib.services.endpoints import EndpointService

        return EndpointService(
            self.process.database("api"),
            box=self.process.reading_box,
            health_read=self.overview_service().endpoint_health,
        )

    def config_service(self) -> ConfigService:
        from chalicelib.services.configs import ConfigService

        return ConfigService(self.process.database("api"))

    def payload_spec_service(self) -> PayloadSpecService:
        from chalicelib.services.payload_specs import PayloadSpecService

        return PayloadSpecService(self.process.database("api"))

    def secret_service(self) -> SecretService:
        from chalicelib.services.secrets import SecretService

        return SecretService(self.process.database("api"), self.process.writing_box)

    def topic_service(self) -> TopicService:
        from chalicelib.services.topics import TopicService

        return TopicService(self.process.database("api"))

    def api_key_service(self) -> ApiKeyService:
        from chalicelib.services.api_keys import ApiKeyService

        return ApiKeyService(self.process.database("api"))

    def metrics_service(self) -> MetricsService:
        from chalicelib.services.metrics import MetricsService

        return MetricsService(self.process.database("api"), self.process.clock)

    def health_service(self) -> MetricsService:
        """The metrics service over the health pool: its reads time out in seconds."""
        from chalicelib.services.metrics import MetricsService

        return MetricsService(self.process.health_database(), self.process.clock)

    def overview_service(self) -> OverviewService:
        from chalicelib.services.overview import OverviewService

        return OverviewService(self.process.database("api"), self.process.clock)
