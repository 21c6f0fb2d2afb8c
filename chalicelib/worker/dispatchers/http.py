"""HTTP delivery with one shared ``urllib3.PoolManager`` (keep-alive across executions).

Redirects are never followed (a 3xx is judged against ``expected_status_codes`` like any
status), so a public target cannot bounce the worker to a private one. With the SSRF
guard on, the request goes to the address the guard checked, with the original ``Host``
header and TLS server name.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

import urllib3
from urllib3.exceptions import HTTPError, LocationParseError, NewConnectionError
from urllib3.exceptions import TimeoutError as Urllib3Timeout
from urllib3.util import parse_url

from chalicelib.domain.backoff import RETRY_AFTER_STATUSES, parse_retry_after
from chalicelib.domain.delivery import (
    DeliveryErrorType,
    DeliveryOutcome,
    DeliveryRequest,
    failed,
    succeeded,
)
from chalicelib.worker.ssrf import BlockedTarget, Resolver, resolve_public

DEFAULT_EXPECTED = (200, 201, 202, 204)
DEFAULT_TIMEOUT_MS = 30000
#: Response bodies kept in attempts/outputs are cut to this many bytes.
BODY_LIMIT = 4096
#: How much of an unexpected response's body the error message quotes.
ERROR_BODY_LIMIT = 200
EXECUTION_HEADER = "X-Task-Executor-Execution-Id"
ATTEMPT_HEADER = "X-Task-Executor-Attempt"
_FORBIDDEN_IN_HEADERS = ("\r", "\n", "\0")


class InvalidHttpRequest(Exception):
    """The resolved spec cannot be sent (bad URL, header injection); never retried."""


class HttpDispatcher:
    """Sends one HTTP request per attempt and classifies the result."""

    def __init__(
        self,
        *,
        allow_private: bool,
        pool_maxsize: int = 50,
        resolver: Resolver | None = None,
        clock: Callable[[], datetime],
    ) -> None:
        self._allow_private = allow_private
        self._resolver_kwargs = {} if resolver is None else {"resolver": resolver}
        self._clock = clock
        # block=False: a burst beyond maxsize opens extra connections instead of waiting.
        self._pool = urllib3.PoolManager(num_pools=64, maxsize=pool_maxsize, block=False)

    def dispatch(self, request: DeliveryRequest) -> DeliveryOutcome:
        spec = request.spec
        timeout_ms = int(spec.get("timeout_ms") or DEFAULT_TIMEOUT_MS)
        try:
            method, url, headers, body = _build(request)
            response = self._send(method, url, headers, body, timeout_ms)
        except InvalidHttpRequest as exc:
            return failed(DeliveryErrorType.TEMPLATE_RESOLUTION_FAILED, str(exc), retryable=False)
        except BlockedTarget as exc:
            return failed(DeliveryErrorType.CONNECTION_ERROR, str(exc), retryable=False)
        except NewConnectionError as exc:
            # Before the timeout clause: urllib3 2 makes it a ConnectTimeoutError subclass.
            return failed(DeliveryErrorType.CONNECTION_ERROR, _connection_message(exc))
        except Urllib3Timeout:
            return failed(DeliveryErrorType.TIMEOUT, f"no response within {timeout_ms} ms")
        except HTTPError as exc:
            return failed(DeliveryErrorType.CONNECTION_ERROR, _connection_message(exc))
        return self._classify(response, spec)

    def _send(
        self, method: str, url: str, headers: dict[str, str], body: bytes | None, timeout_ms: int
    ) -> urllib3.BaseHTTPResponse:
        options: dict[str, Any] = {
            "body": body,
            "headers": headers,
            "timeout": urllib3.Timeout(total=timeout_ms / 1000),
            "retries": False,
            "redirect": False,
            "preload_content": False,
        }
        if self._allow_private:
            return self._pool.urlopen(method, url, **options)
        parsed = parse_url(url)
        host = parsed.host or ""
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        address = resolve_public(host.strip("[]"), port, **self._resolver_kwargs)
        pool_kwargs = {"server_hostname": host, "assert_hostname": host}
        pool = self._pool.connection_from_host(
            f"[{address}]" if ":" in address else address,
            port=port,
            scheme=parsed.scheme,
            pool_kwargs=pool_kwargs if parsed.scheme == "https" else None,
        )
        headers.setdefault("Host", parsed.netloc or host)
        return pool.urlopen(method, parsed.request_uri, assert_same_host=False, **options)

    def _classify(
        self, response: urllib3.BaseHTTPResponse, spec: Mapping[str, Any]
    ) -> DeliveryOutcome:
        try:
            raw = response.read(BODY_LIMIT + 1)
        except HTTPError:
            raw = b""
        finally:
            response.drain_conn()
            response.release_conn()
        text = raw[:BODY_LIMIT].decode("utf-8", errors="replace")
        expected = spec.get("expected_status_codes") or DEFAULT_EXPECTED
        status = response.status
        if status in expected:
            return succeeded({"status_code": status, "body": text})
        retry_after = None
        if status in RETRY_AFTER_STATUSES:
            retry_after = parse_retry_after(response.headers.get("Retry-After"), self._clock())
        return failed(
            DeliveryErrorType.HTTP_ERROR,
            f"unexpected status {status} (expected one of {list(expected)})"
            + (f": {text[:ERROR_BODY_LIMIT]}" if text else ""),
            status_code=status,
            retry_after_ms=retry_after,
        )

    def close(self) -> None:
        self._pool.clear()


def _build(request: DeliveryRequest) -> tuple[str, str, dict[str, str], bytes | None]:
    spec = request.spec
    method = str(spec.get("method") or "POST").upper()
    url = spec.get("url")
    if not isinstance(url, str):
        raise InvalidHttpRequest("resolved url is not a string")
    try:
        parsed = parse_url(url)
    except LocationParseError as exc:
        raise InvalidHttpRequest("resolved url is not a valid URL") from exc
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise InvalidHttpRequest("resolved url must be an absolute http:// or https:// URL")
    headers = _headers(spec.get("headers") or {})
    body = None
    if spec.get("body_template") is not None:
        body = json.dumps(spec["body_template"], separators=(",", ":")).encode("utf-8")
        if not any(name.lower() == "content-type" for name in headers):
            headers["Content-Type"] = "application/json"
    headers[EXECUTION_HEADER] = request.execution_id
    headers[ATTEMPT_HEADER] = str(request.attempt)
    if not any(name.lower() == "idempotency-key" for name in headers):
        headers["Idempotency-Key"] = request.execution_id
    return method, url, headers, body


def _headers(raw: Mapping[str, Any]) -> dict[str, str]:
    """Resolved headers as strings; CR/LF/NUL would split the request (header injection)."""
    headers = {}
    for name, value in raw.items():
        text = value if isinstance(value, str) else json.dumps(value)
        for part, label in ((str(name), "name"), (text, "value")):
            if any(char in part for char in _FORBIDDEN_IN_HEADERS):
                # The header name is safe to quote only if it is not the offending part.
                where = f"header {name!r}" if label == "value" else "a header name"
                raise InvalidHttpRequest(f"{where} contains CR, LF or NUL after resolution")
        headers[str(name)] = text
    return headers


def _connection_message(exc: HTTPError) -> str:
    """The library's reason, bounded; the pipeline redacts secret values from it."""
    text = str(getattr(exc, "reason", None) or exc)
    if "refused" in text.lower():
        return f"connection refused by the target: {text[:300]}"
    return f"connection failed: {text[:300]}"
