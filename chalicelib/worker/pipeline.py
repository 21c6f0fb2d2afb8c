"""One execution's pipeline: resolve templates, dispatch, decide what comes next.

Runs on a delivery thread and touches the database only through the caches (config and
secret reads); the attempt and the execution's next status are written later, in a batch,
by the finalizer. Secret values never leave this module except inside the request sent to
the target: outputs and errors are redacted before they are recorded.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from chalicelib.domain.backoff import Rand, decide_retry
from chalicelib.domain.delivery import (
    DeliveryErrorType,
    DeliveryOutcome,
    DeliveryRequest,
    failed,
)
from chalicelib.domain.statuses import AttemptStatus, ExecutionStatus, LogLevel
from chalicelib.domain.templates import Template, TemplateContext
from chalicelib.errors import SecretKeyError, TemplateResolutionFailed
from chalicelib.worker.caches import ConfigCache, SecretCache
from chalicelib.worker.dispatchers import Dispatcher
from chalicelib.worker.models import ClaimedExecution, FinishedExecution

#: Parsed templates kept per process (one per job id); the cache is emptied when full.
TEMPLATE_CACHE_SIZE = 1024


@dataclass(frozen=True)
class Resolved:
    """A request ready to send, the secret values it carries, and the config it used."""

    request: DeliveryRequest
    secrets: tuple[str, ...]
    config_snapshot: Mapping[str, Any] | None


class Pipeline:
    """Turns a claimed execution into a finished one (never raises for a failed delivery)."""

    def __init__(
        self,
        *,
        configs: ConfigCache,
        secrets: SecretCache,
        dispatchers: Mapping[str, Dispatcher],
        clock: Callable[[], datetime],
        rand: Rand = random.random,
    ) -> None:
        self._configs = configs
        self._secrets = secrets
        self._dispatchers = dispatchers
        self._clock = clock
        self._rand = rand
        # Plain dict: single get/set operations are atomic, and two threads parsing the
        # same job's template at once both get a correct one.
        self._templates: dict[str, Template] = {}

    def run(self, claimed: ClaimedExecution) -> FinishedExecution:
        started_at = self._clock()
        started = time.monotonic()
        try:
            resolved = self.resolve(claimed)
        except TemplateResolutionFailed as exc:
            outcome = failed(
                DeliveryErrorType.TEMPLATE_RESOLUTION_FAILED, exc.message, retryable=False
            )
            snapshot = None
        else:
            dispatcher = self._dispatchers[claimed.endpoint_type]
            outcome = dispatcher.dispatch(resolved.request).redacted(resolved.secrets)
            snapshot = resolved.config_snapshot
        duration_ms = int((time.monotonic() - started) * 1000)
        return self._finish(claimed, outcome, started_at, duration_ms, snapshot)

    def resolve(self, claimed: ClaimedExecution) -> Resolved:
        """The endpoint spec with config, secrets and input substituted.

        Config comes from the execution's snapshot if an earlier attempt stored one, else
        from the config cache (and is then returned for the finalizer to snapshot).
        """
        config = claimed.config_snapshot
        fresh = None
        if config is None and claimed.config_ref:
            fresh = self._configs.get(claimed.config_ref)
            config = fresh
        template = self._template(claimed)
        secrets: Mapping[str, str] = {}
        if template.secret_names:
            try:
                secrets = self._secrets.get_many(template.secret_names)
            except SecretKeyError as exc:
                raise TemplateResolutionFailed(f"A secret cannot be decrypted: {exc}") from exc
        context = TemplateContext(input=claimed.input, config=config or {}, secret=secrets)
        spec = template.resolve(context)
        request = DeliveryRequest(
            execution_id=claimed.execution_id, attempt=claimed.attempt, spec=spec
        )
        return Resolved(request, tuple(secrets.values()), fresh)

    def _template(self, claimed: ClaimedExecution) -> Template:
        """The parsed spec, shared by every execution of a job (all carry one snapshot).

        Keyed by job id and checked against the spec itself: a job whose snapshot is empty
        falls back to its endpoint's current row, which can change.
        """
        spec = claimed.spec
        cached = self._templates.get(claimed.job_id)
        if cached is not None and cached.source == spec:
            return cached
        if len(self._templates) >= TEMPLATE_CACHE_SIZE:
            self._templates.clear()
        template = Template(spec)
        self._templates[claimed.job_id] = template
        return template

    def _finish(
        self,
        claimed: ClaimedExecution,
        outcome: DeliveryOutcome,
        started_at: datetime,
        duration_ms: int,
        snapshot: Mapping[str, Any] | None,
    ) -> FinishedExecution:
        common: dict[str, Any] = {
            "execution_id": claimed.execution_id,
            "endpoint": claimed.endpoint,
            "attempt_number": claimed.attempt,
            "started_at": started_at,
            "completed_at": self._clock(),
            "duration_ms": duration_ms,
            "config_snapshot": snapshot,
        }
        attempt = claimed.attempt
        if outcome.ok:
            return FinishedExecution(
                **common,
                attempt_status=AttemptStatus.SUCCESS,
                next_status=ExecutionStatus.SUCCESS,
                output=outcome.output,
                log_message=f"Attempt {attempt} succeeded ({_summary(outcome.output)}).",
            )
        decision = decide_retry(
            claimed.retry_policy,
            attempt,
            retryable=outcome.retryable,
            retry_after_ms=outcome.retry_after_ms,
            rand=self._rand,
        )
        failure = f"Attempt {attempt} failed ({_describe(outcome.error)})"
        if decision.retry:
            return FinishedExecution(
                **common,
                attempt_status=AttemptStatus.FAILED,
                next_status=ExecutionStatus.RETRYING,
                error=outcome.error,
                retry_delay_ms=decision.delay_ms,
                log_level=LogLevel.WARN,
                log_message=f"{failure}; attempt {attempt + 1} of {claimed.max_attempts} "
                f"scheduled in {decision.delay_ms} ms ({decision.reason}).",
            )
        return FinishedExecution(
            **common,
            attempt_status=AttemptStatus.FAILED,
            next_status=ExecutionStatus.FAILED,
            error=outcome.error,
            log_level=LogLevel.ERROR,
            log_message=f"{failure}; execution failed: {decision.reason}.",
        )


def _summary(output: Mapping[str, Any] | None) -> str:
    """Non-body output fields (status, partition/offset, entry id): safe and short."""
    return ", ".join(f"{k}={v}" for k, v in (output or {}).items() if k != "body")


def _describe(error: Mapping[str, Any] | None) -> str:
    error = error or {}
    status = f" {error['status_code']}" if "status_code" in error else ""
    return f"{error.get('type')}{status}: {error.get('message', '')}"
