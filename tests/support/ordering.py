"""What the ordering key tests share: a loopback HTTP sink that records each key's
arrivals (and can hang one key), posting keyed jobs, and reading whether an execution
waits behind its key's head."""

from __future__ import annotations

import json
import threading
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from chalicelib.db.connection import Database
from chalicelib.worker import Worker
from tests.support.api_client import ApiClient
from tests.support.factories import register_endpoint
from tests.support.seed.worker import statuses
from tests.support.served import HttpTarget
from tests.support.waiting import wait_for


def hook(api: ApiClient, target: HttpTarget, name: str, **extra: Any) -> None:
    spec = {"url": target.url(f"/{name}"), "method": "POST", "expected_status_codes": [200]}
    register_endpoint(api, name, spec=spec, **extra)


def post(api: ApiClient, endpoint: str, key: str, ordering_key: str | None, **extra: Any) -> str:
    body: dict[str, Any] = {
        "endpoint": endpoint,
        "trigger": "IMMEDIATE",
        "idempotency_key": key,
        "input": {"key": ordering_key, "n": key},
        **extra,
    }
    if ordering_key is not None:
        body["ordering_key"] = ordering_key
    reply = api.post("/jobs", body)
    assert reply.status == 201, reply.body
    return str(reply.body["execution"]["execution_id"])


def arrivals(target: HttpTarget, path: str) -> list[dict[str, Any]]:
    return [r.json() for r in target.received(path)]


def by_key(target: HttpTarget, path: str) -> dict[str, list[str]]:
    seen: dict[str, list[str]] = defaultdict(list)
    for body in arrivals(target, path):
        seen[body["key"]].append(body["n"])
    return dict(seen)


def waiting(db: Database, ids: list[str]) -> dict[str, bool]:
    rows = db.run(
        "SELECT execution_id, ordering_wait FROM executions WHERE execution_id = ANY(:ids)",
        ids=ids,
    )
    return {r["execution_id"]: r["ordering_wait"] for r in rows}


@contextmanager
def running(*workers: Worker) -> Iterator[None]:
    """The workers' rings on threads until the block ends."""
    stop = threading.Event()
    rings = [threading.Thread(target=w.run, args=(stop,)) for w in workers]
    for ring in rings:
        ring.start()
    try:
        yield
    finally:
        stop.set()
        for ring in rings:
            ring.join(10)


def delivered(db: Database, ids: list[str], timeout: float = 60) -> None:
    wait_for(
        lambda: statuses(db, ids),
        f"{len(ids)} ended",
        until=lambda c: c.get("SUCCESS", 0) + c.get("FAILED", 0) == len(ids),
        timeout=timeout,
    )


class KeyedSink:
    """A loopback HTTP target for bodies ``{"key", "n"}``: it records, in arrival order,
    each request's key and n, and the most requests of one key it held at once; requests of
    the keys in ``hang`` wait until :meth:`release` (or the worker's timeout), the others
    are held ``hold`` seconds (so that requests of one key allowed to overlap do)."""

    def __init__(self, *, hang: frozenset[str] = frozenset(), hold: float = 0.0) -> None:
        self.hang = hang
        self.hold = hold
        self.released = threading.Event()
        self.arrived: list[tuple[str, str]] = []
        self.most_at_once: dict[str, int] = defaultdict(int)
        self._in_flight: dict[str, int] = defaultdict(int)
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/sink"

    def release(self) -> None:
        self.released.set()

    def close(self) -> None:
        self.release()
        self._server.shutdown()
        self._server.server_close()

    def order(self) -> dict[str, list[str]]:
        """Each key's n values, in arrival order."""
        seen: dict[str, list[str]] = defaultdict(list)
        with self._lock:
            for key, n in self.arrived:
                seen[key].append(n)
        return dict(seen)

    def _serve(self, body: dict[str, Any]) -> None:
        key, n = str(body["key"]), str(body["n"])
        with self._lock:
            self.arrived.append((key, n))
            self._in_flight[key] += 1
            self.most_at_once[key] = max(self.most_at_once[key], self._in_flight[key])
        try:
            if key in self.hang:
                self.released.wait(60)
            elif self.hold:
                self.released.wait(self.hold)  # the sink's own pace, never asserted on
        finally:
            with self._lock:
                self._in_flight[key] -= 1

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        sink = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                sink._serve(json.loads(self.rfile.read(length)))
                try:
                    self.send_response(200)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"{}")
                except OSError:
                    self.close_connection = True

            def log_message(self, format: str, *args: Any) -> None:
                return

        return Handler


def sink_endpoint(api: ApiClient, target: KeyedSink, name: str, **extra: Any) -> None:
    spec = {"url": target.url(), "method": "POST", "expected_status_codes": [200]}
    spec.update(extra.pop("spec", {}))
    register_endpoint(api, name, spec=spec, **extra)


def batch(api: ApiClient, endpoint: str, items: list[tuple[str, str | None]]) -> list[str]:
    """POST /jobs/batch of IMMEDIATE jobs (idempotency key, ordering key); their execution
    ids, in order."""
    jobs = []
    for key, ordering_key in items:
        job: dict[str, Any] = {
            "endpoint": endpoint,
            "trigger": "IMMEDIATE",
            "idempotency_key": key,
            "input": {"key": ordering_key or "-", "n": key},
        }
        if ordering_key is not None:
            job["ordering_key"] = ordering_key
        jobs.append(job)
    reply = api.post("/jobs/batch", {"jobs": jobs})
    assert reply.status == 200, reply.body
    assert {item["status"] for item in reply.body["items"]} == {201}
    return [str(item["job"]["execution"]["execution_id"]) for item in reply.body["items"]]
