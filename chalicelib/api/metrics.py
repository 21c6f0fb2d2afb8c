"""``GET /health`` (no API key: for load balancers) and ``GET /metrics`` (Prometheus text).

Both read the database (:mod:`chalicelib.services.metrics`): /health answers 200 when
this process is up and the database answers, else 503 ``DATABASE_UNAVAILABLE`` in the
error envelope; /metrics shows figures derived from the database, right for the whole
deployment whichever container answers.
"""

from __future__ import annotations

from chalice import Response

from chalicelib import services
from chalicelib.api.http import Resource

resource = Resource(__name__)


@resource.route("/health", methods=["GET"])
def health() -> dict[str, str]:
    """200 when the process is up and the database reachable (no API key needed)."""
    services.metrics_service().ping()
    return {"status": "ok", "database": "ok"}


@resource.route("/metrics", methods=["GET"])
def metrics() -> Response:
    """The Prometheus text exposition (format 0.0.4) of the deployment's figures."""
    from chalicelib.domain.prometheus import CONTENT_TYPE

    text = services.metrics_service().exposition()
    return Response(body=text, status_code=200, headers={"Content-Type": CONTENT_TYPE})
