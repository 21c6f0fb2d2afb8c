"""``GET /health`` (no API key: for load balancers) and ``GET /metrics`` (Prometheus text).

Both read the database (:mod:`chalicelib.services.metrics`): /health answers 200 when
this process is up, the database answers and no process that beat lately reports a
background loop down; else 503 in the error envelope, ``DATABASE_UNAVAILABLE`` or
``LOOP_DOWN`` (with ``loops``: which loops, since when, on what error type). /metrics shows
figures derived from the database, right for the whole deployment whichever container
answers, ``te_loop_up{component,loop}`` among them.
"""

from __future__ import annotations

from chalice import Response

from chalicelib.api.http import Resource
from chalicelib.errors import LoopDown

resource = Resource(__name__)


@resource.route("/health", methods=["GET"])
def health() -> dict[str, str]:
    """200 when the process is up, the database reachable and no loop down (no API key)."""
    # The health pool: a stalled database is a 503 within seconds, not a hang.
    down = resource.services.health_service().health()
    if down:
        names = ", ".join(sorted({loop.loop for loop in down}))
        raise LoopDown(
            f"Background loops down: {names}.",
            loops=[
                {"loop": loop.loop, "phase": loop.phase, "since": loop.since, "error": loop.error}
                for loop in down
            ],
        )
    return {"status": "ok", "database": "ok"}


@resource.route("/metrics", methods=["GET"])
def metrics() -> Response:
    """The Prometheus text exposition (format 0.0.4) of the deployment's figures."""
    from chalicelib.domain.prometheus import CONTENT_TYPE

    text = resource.services.metrics_service().exposition()
    return Response(body=text, status_code=200, headers={"Content-Type": CONTENT_TYPE})
