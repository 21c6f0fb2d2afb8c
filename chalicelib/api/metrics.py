"""``GET /health/live`` (liveness), ``GET /health`` (the deployment) and ``GET /metrics``.

``/health/live`` answers 200 while this process serves, reading nothing: what a load
balancer probes, so no other process's trouble takes an API container out of service.

``/health`` (no key either) reads the database (:mod:`chalicelib.services.metrics`): 200
with the profile and the live processes of each kind when the database answers, every kind
of process that has run in the deployment has a live one and no process that beat lately
reports a background loop down; else 503 in the error envelope: ``DATABASE_UNAVAILABLE``,
``PROCESS_DOWN`` (with ``kinds``: the worker or the scheduler has stopped) or ``LOOP_DOWN``
(with ``loops``: which loops, since when, on what error type). /metrics shows figures
derived from the database, right for the whole deployment whichever container answers,
``te_live_processes{kind}`` and ``te_loop_up{component,loop}`` among them.
"""

from __future__ import annotations

from typing import Any

from chalice import Response

from chalicelib.api.http import Resource
from chalicelib.errors import LoopDown, ProcessDown

resource = Resource(__name__)


@resource.route("/health/live", methods=["GET"], beats=False)
def live() -> dict[str, str]:
    """200 while this process serves requests (no API key, no database read)."""
    return {"status": "ok"}


@resource.route("/health", methods=["GET"])
def health() -> dict[str, Any]:
    """200 when the database answers, no kind of process is missing and no loop is down."""
    # The health pool: a stalled database is a 503 within seconds, not a hang.
    state = resource.services.health_service().health()
    missing = state.kinds_down
    if missing:
        raise ProcessDown(
            f"No live {' or '.join(missing)} process: due work waits until one runs again.",
            kinds=missing,
        )
    down = state.loops_down
    if down:
        names = ", ".join(sorted({loop.loop for loop in down}))
        raise LoopDown(
            f"Background loops down: {names}.",
            loops=[
                {"loop": loop.loop, "phase": loop.phase, "since": loop.since, "error": loop.error}
                for loop in down
            ],
        )
    return {
        "status": "ok",
        "database": "ok",
        "profile": resource.services.profile,
        "processes": {k.kind: k.live for k in state.kinds},
    }


@resource.route("/metrics", methods=["GET"])
def metrics() -> Response:
    """The Prometheus text exposition (format 0.0.4) of the deployment's figures."""
    from chalicelib.domain.prometheus import CONTENT_TYPE

    text = resource.services.metrics_service().exposition()
    return Response(body=text, status_code=200, headers={"Content-Type": CONTENT_TYPE})
