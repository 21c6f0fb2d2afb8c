"""OpenTelemetry spans of a job's trace, where an exporter is configured.

Off unless the process is configured the standard way (:func:`from_environment`):
``OTEL_TRACES_EXPORTER`` names one or more exporters (``otlp``, ``console``, ... as the
OpenTelemetry SDK registers them; the OTLP exporter is its own package,
``opentelemetry-exporter-otlp``), or the process runs under ``opentelemetry-instrument``,
which installs an SDK tracer provider before the service starts. ``OTEL_SDK_DISABLED=true``
turns it off. Off, nothing of OpenTelemetry is imported and every caller holds None
instead of a :class:`Tracing`: the worker's claim, delivery and finalize do one ``is None``
test more, and a delivery of a job with a ``traceparent`` builds that one string.

On, a job's trace (:mod:`chalicelib.domain.trace_context`) gets these spans:

* the API call that created it (``POST /jobs``, ``POST /jobs/batch``; kind SERVER), a
  child of the request's ``traceparent`` or the root of a new trace; the job keeps this
  span's context, so what follows is its child;
* the claim of each of its executions (``claim``), with the claim statement's times;
* each delivery attempt (``attempt``; kind PRODUCER), whose span id is the parent-id
  that attempt sends in its ``traceparent``.

Which exporter and service name: the standard variables, read by the SDK
(``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_EXPORTER_OTLP_*``...).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

from chalicelib.domain.trace_context import TraceContext

log = logging.getLogger("chalicelib.tracing")

#: The instrumentation scope of every span.
SCOPE = "task-executor"
_EXPORTER_GROUP = "opentelemetry_traces_exporter"


class Tracing:
    """Makes the spans of jobs' traces through one tracer provider (an SDK provider, or
    anything with ``get_tracer``: tests pass one with an in-memory exporter)."""

    def __init__(self, provider: Any) -> None:
        from opentelemetry import trace

        self._trace = trace
        self._tracer = provider.get_tracer(SCOPE)

    @contextmanager
    def api_call(self, name: str, incoming: TraceContext | None) -> Iterator[TraceContext]:
        """A SERVER span around an API call, child of ``incoming`` (or a new trace); yields
        the context the jobs it creates keep (this span's, with ``incoming``'s tracestate)."""
        kind = self._trace.SpanKind.SERVER
        with self._tracer.start_as_current_span(
            name, context=self._parent(incoming), kind=kind
        ) as span:
            state = None if incoming is None else incoming.tracestate
            yield TraceContext(traceparent_of(span), state)

    def claimed(
        self,
        traced: list[tuple[str, str | None, str]],
        start_ns: int,
        end_ns: int,
        worker_id: str,
    ) -> None:
        """One ``claim`` span per (traceparent, tracestate, execution id) claimed together,
        with the claim statement's start and end."""
        for traceparent, tracestate, execution_id in traced:
            span = self._tracer.start_span(
                "claim",
                context=self._parent(TraceContext(traceparent, tracestate)),
                start_time=start_ns,
                attributes={"te.execution_id": execution_id, "te.worker_id": worker_id},
            )
            span.end(end_time=end_ns)

    def start_attempt(
        self, traceparent: str, tracestate: str | None, attributes: Mapping[str, Any]
    ) -> Any:
        """A PRODUCER span for one delivery attempt (ended by :meth:`end_attempt`)."""
        return self._tracer.start_span(
            "attempt",
            context=self._parent(TraceContext(traceparent, tracestate)),
            kind=self._trace.SpanKind.PRODUCER,
            attributes=dict(attributes),
        )

    def end_attempt(self, span: Any, *, ok: bool, error_type: str | None) -> None:
        if not ok:
            span.set_attribute("error.type", error_type or "FAILED")
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, error_type))
        span.end()

    def _parent(self, context: TraceContext | None) -> Any:
        """The OpenTelemetry context whose current span is ``context`` (a remote parent);
        an empty context (a new trace) without one."""
        trace = self._trace
        if context is None:
            return trace.set_span_in_context(trace.INVALID_SPAN)
        state = trace.TraceState.from_header([context.tracestate] if context.tracestate else [])
        parent = trace.SpanContext(
            trace_id=int(context.trace_id, 16),
            span_id=int(context.parent_id, 16),
            is_remote=True,
            trace_flags=trace.TraceFlags(int(context.flags, 16)),
            trace_state=state,
        )
        return trace.set_span_in_context(trace.NonRecordingSpan(parent))


def traceparent_of(span: Any) -> str:
    """The ``traceparent`` naming ``span`` as the parent."""
    context = span.get_span_context()
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


def api_call(
    tracing: Tracing | None, name: str, incoming: TraceContext | None
) -> AbstractContextManager[TraceContext | None]:
    """:meth:`Tracing.api_call`, or ``incoming`` as it is when tracing is off."""
    return nullcontext(incoming) if tracing is None else tracing.api_call(name, incoming)


def from_environment(env: Mapping[str, str]) -> Tracing | None:
    """The process's tracing as the standard ``OTEL_*`` variables configure it (see the
    module), or None: off. An exporter that cannot be loaded is logged and left out."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    names = [n.strip() for n in env.get("OTEL_TRACES_EXPORTER", "").split(",") if n.strip()]
    names = [n for n in names if n != "none"]
    if not names:
        return _installed()
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        log.warning("OTEL_TRACES_EXPORTER is set but opentelemetry-sdk is not installed")
        return None
    service = env.get("OTEL_SERVICE_NAME") or SCOPE
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    loaded = 0
    for name in names:
        exporter = _exporter(name)
        if exporter is not None:
            provider.add_span_processor(BatchSpanProcessor(exporter()))
            loaded += 1
    return Tracing(provider) if loaded else None


def _exporter(name: str) -> Any:
    from importlib.metadata import entry_points

    found = list(entry_points(group=_EXPORTER_GROUP, name=name))
    if not found:
        log.warning("OpenTelemetry traces exporter %r is not installed; left out", name)
        return None
    return found[0].load()


def _installed() -> Tracing | None:
    """The SDK tracer provider someone installed before us (``opentelemetry-instrument``),
    looked for only if the SDK is already imported: otherwise none can be installed."""
    if "opentelemetry.sdk.trace" not in sys.modules:
        return None
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    provider = trace.get_tracer_provider()
    return Tracing(provider) if isinstance(provider, TracerProvider) else None
