"""One execution's pipeline: resolve templates (prepare), then, once the delivery loop has
dispatched the request, decide what comes next (complete).

Preparation runs on the thread that claimed the execution (the claimer's own loop, or the
finalizer's when it refills the slots it freed: :mod:`chalicelib.worker.starter`) and touches the
database only through the caches (config and secret reads); the attempt and the
execution's next status are written later, in a batch, by the finalizer. Secret values
never leave this module except inside the request sent to the target: outputs and errors
are redacted before they are recorded.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from chalicelib.domain.auto_pause import is_gone
from chalicelib.domain.backoff import Rand, decide_retry, endpoint_hold_ms
from chalicelib.domain.body_text import text_encoder
from chalicelib.domain.delivery import (
    MAX_REQUEST_BYTES,
    DeliveryErrorType,
    DeliveryOutcome,
    DeliveryRequest,
    failed,
)
from chalicelib.domain.job_delivery import overridden_spec
from chalicelib.domain.loops import fault_reason
from chalicelib.domain.signing import (
    MalformedSigningSecret,
    SigningKeys,
    signing_keys,
    signing_secret_of,
)
from chalicelib.domain.statuses import AttemptStatus, ExecutionStatus, LogLevel
from chalicelib.domain.templates import RenderTooLarge, Template, TemplateContext
from chalicelib.domain.trace_context import attempt_traceparent, new_parent_id
from chalicelib.domain.url_prefixes import url_problem
from chalicelib.errors import SecretKeyError, TemplateResolutionFailed
from chalicelib.tracing import Tracing
from chalicelib.worker.caches import CachedSecret, ConfigCache, SecretCache
from chalicelib.worker.models import ClaimedExecution, FinishedExecution, expired, unprocessable

#: Parsed templates kept per process: endpoints remembered (the cache is emptied when
#: full) and snapshot versions per endpoint.
TEMPLATE_CACHE_SIZE = 1024
VERSIONS_PER_ENDPOINT = 4


class TargetNotAllowed(Exception):
    """The job's own URL is not under the allowed_url_prefixes of the endpoint definition
    it is delivered with (changed since the job was written, or a retry with the current
    one): not sent, not retried."""


@dataclass(frozen=True)
class Resolved:
    """A request ready to send, the secret values it carries (with every spelling of its
    signing keys: what redaction hides), and the config it used."""

    request: DeliveryRequest
    secrets: tuple[str, ...]
    config_snapshot: Mapping[str, Any] | None


@dataclass(frozen=True)
class Prepared:
    """A claimed execution with its resolved request, waiting to be dispatched."""

    claimed: ClaimedExecution
    resolved: Resolved
    started_at: datetime
    started: float  #: time.monotonic() when preparation began (for duration_ms)
    #: The attempt's OpenTelemetry span (:mod:`chalicelib.tracing`), from :meth:`Pipeline.begin`.
    span: Any = None

    @property
    def request(self) -> DeliveryRequest:
        return self.resolved.request


class Pipeline:
    """Turns a claimed execution into a finished one (never raises for a failed delivery)."""

    def __init__(
        self,
        *,
        configs: ConfigCache,
        secrets: SecretCache,
        clock: Callable[[], datetime],
        rand: Rand = random.random,
        rotation_window: timedelta = timedelta(hours=24),
        tracing: Tracing | None = None,
    ) -> None:
        """``rotation_window``: how long after a signing secret's rotation its previous
        key still signs too (``TE_SIGNING_ROTATION_WINDOW_SEC``); ``tracing``: the
        attempts' spans (None: off)."""
        self._tracing = tracing
        self._configs = configs
        self._secrets = secrets
        self._clock = clock
        self._rand = rand
        self._rotation_window = rotation_window
        # Plain dict of tuples: single get/set operations are atomic, and two threads
        # parsing the same spec at once both get a correct template.
        self._templates: dict[str, tuple[Template, ...]] = {}

    def prepare(self, claimed: ClaimedExecution) -> Prepared | FinishedExecution:
        """Resolve the request to send, or finish at once if its templates cannot resolve
        or the request would pass :data:`MAX_REQUEST_BYTES` (neither is retried: a retry
        would render the same).

        Touches the database only on a config or secret cache miss (its
        :class:`~chalicelib.errors.DatabaseError` propagates: the execution stays RUNNING).
        """
        started_at = self._clock()
        started = time.monotonic()
        try:
            resolved = self.resolve(claimed)
        except TemplateResolutionFailed as exc:
            outcome = failed(
                DeliveryErrorType.TEMPLATE_RESOLUTION_FAILED, exc.message, retryable=False
            )
            return self._finish(claimed, outcome, started_at, _elapsed_ms(started), None)
        except RenderTooLarge as exc:
            outcome = failed(DeliveryErrorType.REQUEST_TOO_LARGE, str(exc), retryable=False)
            return self._finish(claimed, outcome, started_at, _elapsed_ms(started), None)
        except TargetNotAllowed as exc:
            outcome = failed(DeliveryErrorType.CONNECTION_ERROR, str(exc), retryable=False)
            return self._finish(claimed, outcome, started_at, _elapsed_ms(started), None)
        return Prepared(claimed=claimed, resolved=resolved, started_at=started_at, started=started)

    def unprocessable(
        self, claimed: ClaimedExecution, exc: BaseException | str, *, sent: bool = False
    ) -> FinishedExecution:
        """The execution finished FAILED ``UNPROCESSABLE`` (:func:`models.unprocessable`)."""
        reason = exc if isinstance(exc, str) else fault_reason(exc)
        return unprocessable(claimed, reason, self._clock(), sent=sent)

    def expired(self, claimed: ClaimedExecution) -> FinishedExecution:
        """The execution finished FAILED ``EXPIRED``, unsent (:func:`models.expired`)."""
        return expired(claimed, self._clock())

    def begin(self, prepared: Prepared) -> Prepared:
        """The same execution, its attempt's clock started now (just before the send); a
        job's trace context gets this attempt's own parent-id (and span, tracing on)."""
        begun = dataclasses.replace(prepared, started_at=self._clock(), started=time.monotonic())
        claimed = prepared.claimed
        if claimed.traceparent is None:
            return begun
        span = None
        if self._tracing is None:
            parent_id = new_parent_id()
        else:
            span = self._tracing.start_attempt(
                claimed.traceparent,
                claimed.tracestate,
                {
                    "te.execution_id": claimed.execution_id,
                    "te.endpoint": claimed.endpoint,
                    "te.attempt": claimed.attempt,
                },
            )
            parent_id = f"{span.get_span_context().span_id:016x}"
        traceparent = attempt_traceparent(claimed.traceparent, parent_id)
        request = dataclasses.replace(begun.request, traceparent=traceparent)
        resolved = dataclasses.replace(begun.resolved, request=request)
        return dataclasses.replace(begun, resolved=resolved, span=span)

    def complete(self, prepared: Prepared, outcome: DeliveryOutcome) -> FinishedExecution:
        """The finished execution for a delivery's outcome (redacted of secret values)."""
        resolved = prepared.resolved
        if prepared.span is not None and self._tracing is not None:
            self._tracing.end_attempt(prepared.span, ok=outcome.ok, error_type=outcome.error_type)
        return self._finish(
            prepared.claimed,
            outcome.redacted(resolved.secrets),
            prepared.started_at,
            _elapsed_ms(prepared.started),
            resolved.config_snapshot,
        )

    def resolve(self, claimed: ClaimedExecution) -> Resolved:
        """The endpoint spec with config, secrets and input substituted.

        Config comes from the execution's snapshot if an earlier attempt stored one, else
        from the config cache (and is then returned for the finalizer to snapshot).
        """
        _check_own_url(claimed)
        config = claimed.config_snapshot
        fresh = None
        if config is None and claimed.config_ref:
            fresh = self._configs.get(claimed.config_ref)
            config = fresh
        template = self._template(claimed)
        signer = signing_secret_of(claimed.spec)
        entries: Mapping[str, CachedSecret] = {}
        if template.secret_names or signer:
            try:  # one cache read (at most one query) for template and signing secrets
                entries = self._secrets.entries({*template.secret_names, *filter(None, [signer])})
            except SecretKeyError as exc:
                raise TemplateResolutionFailed(f"A secret cannot be decrypted: {exc}") from exc
        secrets = {n: e.value for n, e in entries.items() if n in template.secret_names}
        context = TemplateContext(input=claimed.input, config=config or {}, secret=secrets)
        # Counted as it renders: a template repeating a large value stops at the limit.
        rendered = template.resolve(context, limit=MAX_REQUEST_BYTES)
        spec = overridden_spec(rendered, claimed.overrides)  # the job's url and timeout_ms
        keys = None if signer is None else self._signing_keys(signer, entries.get(signer))
        request = DeliveryRequest(
            execution_id=claimed.execution_id,
            attempt=claimed.attempt,
            spec=spec,
            signing=keys,
            headers=claimed.headers,
            tracestate=claimed.tracestate,
            text_body=template.text_body,
        )
        hidden = (
            *secrets.values(),
            *(keys.redaction_forms() if keys else ()),
            *claimed.credentials,  # the job's credential headers, which a target may echo
        )
        return Resolved(request, hidden, fresh)

    def _signing_keys(self, name: str, entry: CachedSecret | None) -> SigningKeys:
        """The keys a signed endpoint's delivery uses; a missing or malformed signing secret
        fails the execution like an unresolvable template (the message never quotes it)."""
        if entry is None:
            raise TemplateResolutionFailed(f"Signing secret '{name}' does not exist.")
        try:
            return signing_keys(
                entry.value,
                entry.previous,
                entry.rotated_at,
                now=self._clock(),
                window=self._rotation_window,
            )
        except MalformedSigningSecret as exc:
            raise TemplateResolutionFailed(f"Signing secret '{name}' cannot sign: {exc}.") from None

    def _template(self, claimed: ClaimedExecution) -> Template:
        """The parsed spec, shared by every execution that carries the same snapshot.

        Keyed by endpoint name and matched on the spec itself: jobs snapshot their endpoint
        when created, so a few versions of one endpoint can be live at once (kept newest
        first, at most :data:`VERSIONS_PER_ENDPOINT`).
        """
        spec = claimed.spec
        versions = self._templates.get(claimed.endpoint)
        if versions is not None:
            for template in versions:
                if template.source == spec:
                    return template
        if len(self._templates) >= TEMPLATE_CACHE_SIZE:
            self._templates.clear()
        template = Template(spec, text_body=text_encoder(spec))
        # Replace rather than mutate: another thread may be iterating the old tuple.
        self._templates[claimed.endpoint] = (template, *(versions or ()))[:VERSIONS_PER_ENDPOINT]
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
            "follows": claimed.follows,
        }
        attempt = claimed.attempt
        if outcome.ok:
            common["attempt_status"] = AttemptStatus.SUCCESS
            common["next_status"] = ExecutionStatus.SUCCESS
            common["output"] = outcome.output
            common["log_message"] = f"Attempt {attempt} succeeded ({_summary(outcome.output)})."
            return FinishedExecution.of(common)
        decision = decide_retry(
            claimed.retry_policy,
            attempt,
            retryable=outcome.retryable,
            retry_after_ms=outcome.retry_after_ms,
            rand=self._rand,
            elapsed_ms=claimed.retry_elapsed_now_ms(),
        )
        failure = f"Attempt {attempt} failed ({_describe(outcome.error)})"
        # A Retry-After holds the whole endpoint back, and a 410 Gone pauses it, whatever
        # becomes of this execution (it keeps its retry policy: a retry waits for a resume).
        common["hold_ms"] = endpoint_hold_ms(outcome.retry_after_ms)
        common["gone"] = is_gone(claimed.endpoint_type, outcome.error)
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


def _check_own_url(claimed: ClaimedExecution) -> None:
    """The job's own URL, if any, against the prefixes of the definition delivered with;
    its host is then judged by the address policy as any target's (the dispatcher)."""
    url = (claimed.overrides or {}).get("url")
    if url is None:
        return
    problem = url_problem(url, claimed.spec.get("allowed_url_prefixes"))
    if problem:
        raise TargetNotAllowed(f"the job's url is not an allowed target: {problem}")


def _elapsed_ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def _summary(output: Mapping[str, Any] | None) -> str:
    """Non-body output fields (status, partition/offset, entry id): safe and short."""
    return ", ".join(f"{k}={v}" for k, v in (output or {}).items() if k != "body")


def _describe(error: Mapping[str, Any] | None) -> str:
    error = error or {}
    status = f" {error['status_code']}" if "status_code" in error else ""
    return f"{error.get('type')}{status}: {error.get('message', '')}"
