"""HTTP delivery over keep-alive connection pools, one per target (scheme, address, port).

Redirects are never followed (a 3xx is judged against ``expected_status_codes`` like any
status), so a public target cannot bounce the worker to a private one. With the SSRF
guard on, the request goes to the address the guard checked, with the original ``Host``
header and TLS server name.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

import urllib3
from urllib3.exceptions import HTTPError, LocationParseError, NewConnectionError
from urllib3.exceptions import TimeoutError as Urllib3Timeout
from urllib3.util import Url, parse_url

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
        self._maxsize = pool_maxsize
        # One connection pool per (scheme, address, port, TLS name), built on first use and
        # called directly: PoolManager.urlopen re-parses the URL and normalizes a pool key
        # on every request (~25 % of the worker's CPU in bench/ profiles).
        self._pools: dict[tuple[str, str, int, str], urllib3.HTTPConnectionPool] = {}
        self._pools_lock = threading.Lock()
        self._timeouts: dict[int, urllib3.Timeout] = {}

    def dispatch(self, request: DeliveryRequest) -> DeliveryOutcome:
        spec = request.spec
        timeout_ms = int(spec.get("timeout_ms") or DEFAULT_TIMEOUT_MS)
        try:
            method, url, headers, body = _build(request)
            response = self._send(method, url, headers, body, self._timeout(timeout_ms))
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

    def _timeout(self, timeout_ms: int) -> urllib3.Timeout:
        timeout = self._timeouts.get(timeout_ms)
        if timeout is None:
            timeout = self._timeouts[timeout_ms] = urllib3.Timeout(total=timeout_ms / 1000)
        return timeout

    def _send(
        self,
        method: str,
        url: Url,
        headers: dict[str, str],
        body: bytes | None,
        timeout: urllib3.Timeout,
    ) -> urllib3.BaseHTTPResponse:
        host = (url.host or "").strip("[]")
        port = url.port or (443 if url.scheme == "https" else 80)
        address = host
        if not self._allow_private:
            # Connect to the checked address, never to a second DNS answer.
            address = resolve_public(host, port, **self._resolver_kwargs)
            headers.setdefault("Host", url.netloc or host)
        pool = self._pool(str(url.scheme), address, port, host)
        return pool.urlopen(
            method,
            url.request_uri,
            body=body,
            headers=headers,
            timeout=timeout,
            retries=False,
            redirect=False,
            assert_same_host=False,
            preload_content=False,
        )

    def _pool(self, scheme: str, address: str, port: int, host: str) -> urllib3.HTTPConnectionPool:
        key = (scheme, address, port, host)
        pool = self._pools.get(key)
        if pool is not None:
            return pool
        with self._pools_lock:
            pool = self._pools.get(key)
            if pool is None:
                pool = self._pools[key] = self._new_pool(scheme, address, port, host)
            return pool

    def _new_pool(
        self, scheme: str, address: str, port: int, host: str
    ) -> urllib3.HTTPConnectionPool:
        # block=False: a burst beyond maxsize opens extra connections instead of waiting.
        options: dict[str, Any] = {"maxsize": self._maxsize, "block": False}
        bracketed = f"[{address}]" if ":" in address else address
        if scheme == "https":
            # TLS is verified against the name in the URL, not the checked address.
            return urllib3.HTTPSConnectionPool(
                bracketed, port, server_hostname=host, assert_hostname=host, **options
            )
        return urllib3.HTTPConnectionPool(bracketed, port, **options)

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
        with self._pools_lock:
            pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            pool.close()


def _build(request: DeliveryRequest) -> tuple[str, Url, dict[str, str], bytes | None]:
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
    return method, parsed, headers, body


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
