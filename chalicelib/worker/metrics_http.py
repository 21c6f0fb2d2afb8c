"""The worker process's own counters in Prometheus text, on an optional port.

``TE_WORKER_METRICS_PORT`` set (local and Fargate runs): ``GET /metrics`` on
``TE_WORKER_METRICS_HOST`` (``127.0.0.1`` unless chosen otherwise) answers with this
process's counters since it started: executions claimed, finalized by outcome, in flight,
and its database pool's 40001 retries and reconnects. The same figures go to the log as
``worker_metrics`` lines (CloudWatch metric filters read those in AWS). Figures of the
whole deployment (queue depth, lag, durations) are the API's ``GET /metrics``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from chalicelib.domain import prometheus as prom
from chalicelib.logs import log_event

log = logging.getLogger("chalicelib.worker")

#: What the worker's counters are called on the port (the log line's keys, prefixed).
OUTCOMES = ("succeeded", "retrying", "failed")


def worker_families(counters: dict[str, int], worker_id: str) -> list[prom.Family]:
    """The counters of one worker (``worker_metrics``' fields) as metric families."""
    return [
        prom.gauge(
            "te_worker_info",
            "This worker process (value 1).",
            [(worker_id, 1)],
            ("worker_id",),
        ),
        prom.counter(
            "te_worker_claimed",
            "Executions this worker claimed since it started.",
            [(counters.get("claimed", 0),)],
        ),
        prom.counter(
            "te_worker_finalized",
            "Executions this worker finalized since it started, by outcome.",
            [(o, counters.get(o, 0)) for o in OUTCOMES],
            ("outcome",),
        ),
        prom.gauge(
            "te_worker_in_flight",
            "Executions this worker holds right now (claimed, not yet recorded).",
            [(counters.get("in_flight", 0),)],
        ),
        prom.gauge(
            "te_worker_awaiting_record",
            "Of te_worker_in_flight, the executions delivered (or finished unsent) whose "
            "attempts are not yet recorded: rising with a steady te_worker_in_flight, the "
            "database, not the targets, is what holds the slots.",
            [(counters.get("awaiting_record", 0),)],
        ),
        prom.counter(
            "te_worker_db_serialization_retries",
            "Transactions of this process retried after SQLSTATE 40001/40P01.",
            [(counters.get("serialization_retries", 0),)],
        ),
        prom.counter(
            "te_worker_db_reconnects",
            "Database connections of this process discarded as broken.",
            [(counters.get("reconnects", 0),)],
        ),
    ]


def _handler(render: Callable[[], str]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?", 1)[0] != "/metrics":
                self._reply(404, b"not found\n", "text/plain; charset=utf-8")
                return
            self._reply(200, render().encode("utf-8"), prom.CONTENT_TYPE)

        def _reply(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return  # scrapes every few seconds would flood the log

    return Handler


class MetricsServer:
    """A loopback HTTP server answering ``GET /metrics`` from ``render`` in a daemon thread."""

    def __init__(self, host: str, port: int, render: Callable[[], str]) -> None:
        self._server = ThreadingHTTPServer((host, port), _handler(render))
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="te-worker-metrics", daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> MetricsServer:
        self._thread.start()
        log_event(log, "worker_metrics_listening", port=self.port)
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
