"""Fuzz the API from its own OpenAPI document with schemathesis: no input a client can send may
answer 5xx, break the error envelope or leave anything half-written.

The app runs as the local stack serves it (``chalicelib.local.server.make_api_server``) on a free
loopback port in a thread of the test process, on the test's database. Every operation of
``GET /openapi.json`` gets hypothesis-generated cases in both modes (POSITIVE: valid per the
document; NEGATIVE: deliberately invalid), each sent with the bootstrap key, and every
response goes through schemathesis' conformance checks plus our envelope rule. Failures are
collected (not raised inside hypothesis, so nothing shrinks for minutes) and reported with
the exact request as a curl command.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import requests
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.core.failures import FailureGroup

from tests.support.environment import BOOTSTRAP_KEY
from tests.support.served import free_port


@dataclass
class FuzzReport:
    """What a run sent and what broke (one entry per distinct failure)."""

    requests: int = 0
    by_status: dict[int, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    server_errors: int = 0
    unsatisfiable: list[str] = field(default_factory=list)

    def note(self, status: int) -> None:
        self.requests += 1
        self.by_status[status] = self.by_status.get(status, 0) + 1
        if status >= 500:
            self.server_errors += 1

    def summary(self) -> str:
        head = f"{self.requests} requests, statuses {dict(sorted(self.by_status.items()))}"
        return "\n\n".join([head, *self.failures[:20]])


@contextmanager
def api_server() -> Iterator[str]:
    """The app on a free loopback port (the caller has set TE_* for its database)."""
    import app as app_module
    from chalicelib.local.server import make_api_server
    from chalicelib.wiring.api import ApiRoot
    from chalicelib.wiring.process import ProcessRoot

    port = free_port()
    process = ProcessRoot()
    app_module.app.use(ApiRoot(process))
    server = make_api_server(app_module.app, "127.0.0.1", port)
    thread = threading.Thread(target=server.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.server.shutdown()
        server.server.server_close()
        thread.join(timeout=5)
        process.close()


def fetch_document(base_url: str) -> dict[str, Any]:
    """The document exactly as clients get it."""
    doc: dict[str, Any] = requests.get(base_url + "/openapi.json", timeout=10).json()
    return doc


def load_schema(doc: dict[str, Any]) -> Any:
    import schemathesis

    return schemathesis.openapi.from_dict(doc)


def _header(response: Any, name: str) -> str | None:
    """schemathesis' Response keeps headers as {name: [values]} in the server's spelling."""
    for key, values in response.headers.items():
        if key.lower() == name.lower():
            return str(values[0]) if isinstance(values, list) else str(values)
    return None


def _envelope_problem(response: Any) -> str | None:
    """Every 4xx/5xx is ``{"error": {"code", "message", "request_id"}}`` (spec's envelope)."""
    if response.status_code < 400:
        return None
    try:
        body = response.json()
    except ValueError:
        return "error body is not JSON"
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return "error body has no 'error' object"
    for key in ("code", "message", "request_id"):
        if not isinstance(error.get(key), str) or not error[key]:
            return f"error envelope lacks a string {key!r}"
    if _header(response, "X-Request-Id") != error["request_id"]:
        return "X-Request-Id header differs from error.request_id"
    return None


def _checks() -> list[Any]:
    from schemathesis.checks import not_a_server_error
    from schemathesis.specs.openapi.checks import (
        content_type_conformance,
        response_headers_conformance,
        response_schema_conformance,
        status_code_conformance,
    )

    return [
        not_a_server_error,
        status_code_conformance,
        content_type_conformance,
        response_headers_conformance,
        response_schema_conformance,
    ]


def _first_line(failure: BaseException) -> str:
    title = getattr(failure, "title", "") or type(failure).__name__
    text = str(failure).strip().splitlines()
    return f"{title}: {text[0][:300]}" if text else str(title)


class Fuzzer:
    """Sends generated cases for every operation and records what fails."""

    def __init__(self, base_url: str, schema: Any) -> None:
        self.base_url = base_url
        self.schema = schema
        self.session = requests.Session()
        self.report = FuzzReport()
        self._seen: set[str] = set()

    def run(self, examples_per_operation: int, *, derandomize: bool = True) -> FuzzReport:
        from schemathesis import GenerationMode

        operations = [op.ok() for op in self.schema.get_all_operations()]
        for operation in operations:
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
                self._fuzz(operation, mode, examples_per_operation, derandomize)
        return self.report

    def _fuzz(self, operation: Any, mode: Any, examples: int, derandomize: bool) -> None:
        strategy = operation.as_strategy(generation_mode=mode)

        @settings(
            max_examples=examples,
            deadline=None,
            database=None,
            derandomize=derandomize,
            suppress_health_check=list(HealthCheck),
            phases=[Phase.generate],
        )
        @given(case=strategy)
        def one(case: Any) -> None:
            self._send(case)

        try:
            one()
        except Unsatisfiable:
            # NEGATIVE mode has nothing to break in an operation without parameters or body.
            self.report.unsatisfiable.append(f"{operation.label} {mode.value}")

    def _send(self, case: Any) -> None:
        headers = {"Authorization": f"Bearer {BOOTSTRAP_KEY}"}
        response = case.call(base_url=self.base_url, session=self.session, headers=headers)
        self.report.note(response.status_code)
        problems = []
        envelope = _envelope_problem(response)
        if envelope:
            problems.append(envelope)
        try:
            case.validate_response(response, checks=_checks(), headers=headers)
        except FailureGroup as group:
            problems.extend(_first_line(failure) for failure in group.exceptions)
        except AssertionError as exc:
            problems.append(_first_line(exc))
        for problem in problems:
            self._record(case, response, problem)

    def _record(self, case: Any, response: Any, problem: str) -> None:
        key = f"{case.operation.label} {response.status_code} {problem}"
        if key in self._seen:
            return
        self._seen.add(key)
        curl = case.as_curl_command(base_url=self.base_url)
        body = response.text[:400]
        self.report.failures.append(
            f"{key}\n  request: {curl}\n  response: {response.status_code} {body}"
        )


HUGE_INT = "7" * 5000  # Python's json refuses integer literals over 4,300 digits
ODD_METHODS = ("TRACE", "PROPFIND", "BREW")
HOSTILE_ZONES = ("A" * 300, "localtime", "posixrules", "Factory", "posix/Europe/Paris")


def _concrete(path: str) -> str:
    return "/".join("x" if part.startswith("{") else part for part in path.split("/"))


def _body_fields(operation: dict[str, Any]) -> list[str]:
    content = operation.get("requestBody", {}).get("content", {})
    schema = content.get("application/json", {}).get("schema", {})
    return sorted(schema.get("properties", {})) or ["x"]


#: Instants at both far ends of the calendar, 10000-01-01 and year 0 in UTC: values are
#: range-checked at the edge, so neither may reach the database and stop a loop.
EXTREME_INSTANTS = ("9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00")
#: Numbers JSON parsers accept but no database column holds (raw JSON literals).
NON_FINITE = ("NaN", "Infinity", "-Infinity", "1e400")
INSTANT_NAMES = frozenset({"run_at", "starts_at", "ends_at", "since", "until"})


def _cursor(t: str, k: str = "job_x") -> str:
    raw = json.dumps({"v": 1, "t": t, "k": k}).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


FORGED_CURSORS = (*(_cursor(t) for t in EXTREME_INSTANTS), _cursor("2026-01-01T00:00:00Z", "\x00"))


def _query_names(operation: dict[str, Any]) -> list[str]:
    return [p["name"] for p in operation.get("parameters", []) if p.get("in") == "query"]


def _extremes(
    method: str, path: str, operation: dict[str, Any]
) -> Iterator[tuple[str, str, str | None]]:
    """Instants at the calendar's ends in every instant field and query parameter, forged
    cursors wherever a cursor is read, and non-finite numbers in every body field."""
    for name in _query_names(operation):
        if name in INSTANT_NAMES:
            for value in EXTREME_INSTANTS:
                yield method, f"{path}?{name}={value.replace('+', '%2B')}", None
        if name == "cursor":
            for cursor in FORGED_CURSORS:
                yield method, f"{path}?cursor={cursor}", None
    if "requestBody" not in operation:
        return
    for name in _body_fields(operation):
        for literal in NON_FINITE:
            yield method, path, f'{{"{name}": {literal}}}'
        if name in INSTANT_NAMES:
            for value in EXTREME_INSTANTS:
                yield method, path, json.dumps({name: value})


def _hostile_bodies() -> Iterator[tuple[str, str, str | None]]:
    """Bodies valid but for one hostile value, so they reach the check that must catch it."""
    for zone in HOSTILE_ZONES:
        job = {"endpoint": "e", "trigger": "CRON", "cron": "* * * * *", "timezone": zone}
        yield "POST", "/jobs", json.dumps(job)
    cron = {"endpoint": "e", "trigger": "CRON", "cron": "* * * * *", "timezone": "UTC"}
    delayed = {"endpoint": "e", "trigger": "DELAYED", "idempotency_key": "k"}
    for value in EXTREME_INSTANTS:
        yield "POST", "/jobs", json.dumps({**cron, "ends_at": value})
        yield "POST", "/jobs", json.dumps({**cron, "starts_at": value})
        yield "POST", "/jobs", json.dumps({**delayed, "run_at": value})
        yield "POST", "/jobs/batch", json.dumps({"jobs": [{**delayed, "run_at": value}]})
        yield "POST", "/endpoints/e/redrive", json.dumps({"since": value, "until": value})
    for literal in NON_FINITE:
        item = (
            '{"endpoint": "e", "trigger": "IMMEDIATE", "idempotency_key": "n", "input": {"x": %s}}'
        )
        yield "POST", "/jobs/batch", '{"jobs": [%s]}' % (item % literal)
        yield "POST", "/configs", f'{{"name": "c", "values": {{"x": {literal}}}}}'
    spec = {"name": "p", "schema": {"$ref": "file:///etc/passwd"}}
    yield "POST", "/payload-specs", json.dumps(spec)
    n = 8000
    chain: dict[str, Any] = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(n)}
    chain[f"d{n}"] = {"type": "object"}
    yield (
        "POST",
        "/payload-specs",
        json.dumps({"name": "deep", "schema": {"$defs": chain, "$ref": "#/$defs/d0"}}),
    )


def hostile_requests(doc: dict[str, Any]) -> Iterator[tuple[str, str, str | None]]:
    """Shapes the generators do not make: (method, path, raw JSON body).

    A 5,000-digit integer in every body field of every operation, non-finite numbers in
    every body field, instants at the calendar's ends in every instant field and query
    parameter, forged cursors on every list, host-dependent and over-long timezones, payload
    specs whose $ref points at a file or chains 8,000 refs, and methods no route has.
    """
    for path, operations in doc["paths"].items():
        concrete = _concrete(path)
        for method in ODD_METHODS:
            yield method, concrete, None
        for method, operation in operations.items():
            if "requestBody" in operation:
                for name in _body_fields(operation):
                    yield method.upper(), concrete, f'{{"{name}": {HUGE_INT}}}'
            if isinstance(operation, dict):  # not the path item's own "parameters"
                yield from _extremes(method.upper(), concrete, operation)
    yield from _hostile_bodies()


def send_hostile(base_url: str, doc: dict[str, Any], report: FuzzReport) -> None:
    """Send :func:`hostile_requests`; anything 5xx or outside the envelope is a failure."""
    session = requests.Session()
    headers = {"Authorization": f"Bearer {BOOTSTRAP_KEY}", "Content-Type": "application/json"}
    # An endpoint for the job bodies to name, so a hostile value gets past the 404.
    endpoint = {
        "name": "e",
        "type": "HTTP",
        "spec": {"url": "http://127.0.0.1:9/", "method": "POST"},
    }
    session.post(base_url + "/endpoints", json=endpoint, headers=headers, timeout=30)
    for method, path, body in hostile_requests(doc):
        response = session.request(method, base_url + path, data=body, headers=headers, timeout=30)
        report.note(response.status_code)
        problem = _envelope_problem(_Plain(response))
        if response.status_code >= 500 or problem:
            report.failures.append(
                f"{method} {path} {response.status_code} {problem or 'server error'}\n"
                f"  body: {(body or '')[:120]}\n  response: {response.text[:300]}"
            )


@dataclass
class _Plain:
    """A requests response in the shape _envelope_problem reads (schemathesis' headers)."""

    response: Any

    @property
    def status_code(self) -> int:
        return int(self.response.status_code)

    @property
    def headers(self) -> dict[str, list[str]]:
        return {k: [v] for k, v in self.response.headers.items()}

    def json(self) -> Any:
        return self.response.json()


def fuzz(examples_per_operation: int, *, derandomize: bool = True) -> FuzzReport:
    """Start the API, fuzz every operation, stop it (env must already point at a database).

    Generated cases first (schemathesis), then the hand-picked hostile shapes.
    """
    with api_server() as base_url:
        doc = fetch_document(base_url)
        report = Fuzzer(base_url, load_schema(doc)).run(
            examples_per_operation, derandomize=derandomize
        )
        send_hostile(base_url, doc, report)
        return report


def dump(report: FuzzReport) -> str:
    return json.dumps(
        {"requests": report.requests, "by_status": report.by_status, "failures": report.failures},
        indent=2,
    )
