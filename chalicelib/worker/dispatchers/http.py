"""HTTP delivery on the worker's event loop, over keep-alive connections per target.

:meth:`HttpDispatcher.dispatch_async` runs on the delivery loop
(:mod:`chalicelib.worker.deliveries`) with the lean HTTP/1.1 client of
:mod:`chalicelib.worker.dispatchers.wire`; :meth:`HttpDispatcher.dispatch` is the blocking
form for one-off callers. urllib3 only parses the URL: its connection pools cost most of the
worker's CPU when each delivery held a thread (``bench/results/PROFILE.md``).

What a user expects of an HTTP target:

* **Redirects are never followed**: a 3xx is judged against ``expected_status_codes``
  like any status and its ``Location`` is not fetched, so a public target cannot bounce the
  worker to a private one.
* **TLS is verified** against the default CA store; ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``
  (OpenSSL's variables) replace it, e.g. to trust a private CA. A failed verification is a
  ``CONNECTION_ERROR`` whose message starts "TLS certificate verification failed".
* **Proxies from the environment** (``HTTPS_PROXY``, ``HTTP_PROXY``, ``NO_PROXY``, see
  :mod:`.proxy`).

The address policy (:mod:`chalicelib.worker.ssrf`) with the guard on: the target's host
is resolved here and every address must be public, whether or not a proxy is used, and the
request names the checked address, so no second DNS answer decides where it goes. Without a
proxy the worker connects to that address itself (``Host`` header and TLS server name stay
the URL's host). Through a proxy, the ``CONNECT`` (https) or the absolute-form request
(http) names the checked address and the proxy connects to it; TLS still verifies the
certificate against the URL's host. The proxy's own address is not checked: the operator
set it, not an API client. A proxy that rebuilds ``Host`` from an http request-target (RFC
9112 §3.2.2) shows the target the address instead of its name; https targets are not
affected.
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from urllib3.exceptions import LocationParseError
from urllib3.util import Url, parse_url

from chalicelib.domain.backoff import RETRY_AFTER_STATUSES, parse_retry_after
from chalicelib.domain.delivery import (
    OUTPUT_BODY_LIMIT,
    DeliveryErrorType,
    DeliveryOutcome,
    DeliveryRequest,
    failed,
    succeeded,
)
from chalicelib.domain.signing import webhook_headers
from chalicelib.worker.dispatchers.proxy import ProxyConfig, proxies_from_environment
from chalicelib.worker.dispatchers.wire import (
    HttpClient,
    Origin,
    Response,
    ResponseTimeout,
    TlsVerifyFailed,
    WireError,
)
from chalicelib.worker.ssrf import BlockedTarget, Resolver, refuse_secret_host, resolve_public

DEFAULT_EXPECTED = (200, 201, 202, 204)
DEFAULT_TIMEOUT_MS = 30000
#: Response body bytes read: more than the output keeps (OUTPUT_BODY_LIMIT), so that the
#: pipeline redacts secrets before it cuts (a secret straddling the cut is still seen).
BODY_READ_LIMIT = OUTPUT_BODY_LIMIT + 1024
EXECUTION_HEADER = "X-Task-Executor-Execution-Id"
ATTEMPT_HEADER = "X-Task-Executor-Attempt"
_FORBIDDEN_IN_HEADERS = re.compile("[\r\n\0]")


class InvalidHttpRequest(Exception):
    """The resolved spec cannot be sent (bad URL, header injection); never retried."""


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One attempt's request, built from the resolved spec."""

    method: str
    url: Url
    headers: dict[str, str]
    body: bytes | None


class HttpDispatcher:
    """Sends one HTTP request per attempt and classifies the result."""

    def __init__(
        self,
        *,
        allow_private: bool,
        pool_maxsize: int = 50,
        resolver: Resolver | None = None,
        clock: Callable[[], datetime],
        ssl_context: ssl.SSLContext | None = None,
        proxies: Mapping[str, str] | None = None,
    ) -> None:
        """``proxies`` as :func:`urllib.request.getproxies` returns them; None reads the
        environment (``HTTPS_PROXY``, ``HTTP_PROXY``, ``ALL_PROXY``, ``NO_PROXY``)."""
        self._allow_private = allow_private
        self._proxies = ProxyConfig(proxies_from_environment() if proxies is None else proxies)
        self._resolver_kwargs = {} if resolver is None else {"resolver": resolver}
        self._clock = clock
        self._maxsize = pool_maxsize
        self._ssl_context = ssl_context
        #: Bound to the delivery loop on first use (a client serves one event loop).
        self._client: HttpClient | None = None

    async def dispatch_async(self, request: DeliveryRequest) -> DeliveryOutcome:
        """Deliver on the running loop, reusing this dispatcher's connections."""
        if self._client is None:
            self._client = HttpClient(
                max_idle_per_origin=self._maxsize, ssl_context=self._ssl_context
            )
        return await self._deliver(self._client, request)

    def dispatch(self, request: DeliveryRequest) -> DeliveryOutcome:
        """Blocking form: one request on a private loop and a fresh connection."""
        return asyncio.run(self._deliver_once(request))

    async def aclose(self) -> None:
        """Close the loop's idle connections (on the delivery loop, at shutdown)."""
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    def close(self) -> None:
        """Nothing is held outside the delivery loop (see :meth:`aclose`)."""

    async def _deliver_once(self, request: DeliveryRequest) -> DeliveryOutcome:
        client = HttpClient(max_idle_per_origin=1, ssl_context=self._ssl_context)
        try:
            return await self._deliver(client, request)
        finally:
            await client.close()

    async def _deliver(self, client: HttpClient, request: DeliveryRequest) -> DeliveryOutcome:
        spec = request.spec
        timeout_ms = int(spec.get("timeout_ms") or DEFAULT_TIMEOUT_MS)
        try:
            outgoing = _build(request)
            origin = await self._origin(outgoing)
            response = await client.request(
                origin,
                outgoing.method,
                outgoing.url.request_uri,
                list(outgoing.headers.items()),
                outgoing.body,
                timeout=timeout_ms / 1000,
                body_limit=BODY_READ_LIMIT,
            )
        except (InvalidHttpRequest, ValueError) as exc:  # ValueError: the client refused it
            return failed(DeliveryErrorType.TEMPLATE_RESOLUTION_FAILED, str(exc), retryable=False)
        except BlockedTarget as exc:
            return failed(DeliveryErrorType.CONNECTION_ERROR, str(exc), retryable=False)
        except ResponseTimeout:
            return failed(DeliveryErrorType.TIMEOUT, f"no response within {timeout_ms} ms")
        except WireError as exc:  # ConnectFailed, ProtocolError
            return failed(DeliveryErrorType.CONNECTION_ERROR, _connection_message(exc))
        return self._classify(response, spec)

    async def _origin(self, outgoing: Outgoing) -> Origin:
        """Where to connect; with the SSRF guard on, an address checked to be public, which
        is also what a proxy is asked for (see the module docstring)."""
        url = outgoing.url
        host = (url.host or "").strip("[]")
        scheme = str(url.scheme)
        port = url.port or (443 if scheme == "https" else 80)
        address = host
        if self._allow_private:
            refuse_secret_host(host)  # the connection's own lookup would send it: refused
        else:
            # Connect (or have the proxy connect) to the checked address, never to a second
            # DNS answer. The lookup blocks, so it runs off the loop.
            check = functools.partial(resolve_public, host, port, **self._resolver_kwargs)
            address = await asyncio.get_running_loop().run_in_executor(None, check)
        return Origin(scheme, address, port, host, self._proxies.for_target(scheme, host, port))

    def _classify(self, response: Response, spec: Mapping[str, Any]) -> DeliveryOutcome:
        text = response.body[:BODY_READ_LIMIT].decode("utf-8", errors="replace")
        expected = spec.get("expected_status_codes") or DEFAULT_EXPECTED
        status = response.status
        if status in expected:
            return succeeded({"status_code": status, "body": text})
        retry_after = None
        if status in RETRY_AFTER_STATUSES:
            retry_after = parse_retry_after(response.headers.get("retry-after"), self._clock())
        return failed(
            DeliveryErrorType.HTTP_ERROR,
            f"unexpected status {status} (expected one of {list(expected)})"
            + (f": {text}" if text else ""),  # cut after redaction (DeliveryOutcome)
            status_code=status,
            retry_after_ms=retry_after,
        )


def _build(request: DeliveryRequest) -> Outgoing:
    """The request to send, headers in this order: the spec's, the job's own and the trace
    context over them, ``Host``, ``Content-Type`` with a body, ours, then the signature."""
    spec = request.spec
    method = str(spec.get("method") or "POST").upper()
    url = spec.get("url")
    if not isinstance(url, str):
        raise InvalidHttpRequest("resolved url is not a string")
    parsed, netloc = _parse_url(url)
    headers = _headers(spec.get("headers") or {})
    if request.headers or request.traceparent is not None:
        headers = _with_job_headers(headers, request)
    present = {name.lower() for name in headers}
    if "host" not in present:
        headers["Host"] = netloc
    body = _body(spec, request.text_body)
    if body is not None and "content-type" not in present:
        headers["Content-Type"] = "application/json"
    _put_identity(headers, present, request)
    return Outgoing(method, parsed, _signed(headers, request, body), body)


def _body(spec: Mapping[str, Any], text: bool) -> bytes | None:
    """The rendered body template: as text (a form, XML or plain text), else as JSON."""
    template = spec.get("body_template")
    if template is None:
        return None
    if text:
        return str(template).encode("utf-8")
    return json.dumps(template, separators=(",", ":")).encode("utf-8")


def _put_identity(headers: dict[str, str], present: set[str], request: DeliveryRequest) -> None:
    """Ours, which receivers deduplicate on: the execution and attempt always, and the
    execution as ``Idempotency-Key`` unless the spec names its own."""
    headers[EXECUTION_HEADER] = request.execution_id
    headers[ATTEMPT_HEADER] = str(request.attempt)
    if "idempotency-key" not in present:
        headers["Idempotency-Key"] = request.execution_id


def _signed(
    headers: dict[str, str], request: DeliveryRequest, body: bytes | None
) -> dict[str, str]:
    """``headers`` with a signed endpoint's signature headers, which replace same-named
    spec headers (any case): receivers verify them."""
    signed = webhook_headers(request.signing, request.execution_id, body or b"")
    if not signed:
        return headers
    return {k: v for k, v in headers.items() if k.lower() not in signed} | signed


def _with_job_headers(headers: dict[str, str], request: DeliveryRequest) -> dict[str, str]:
    """The endpoint's headers with the job's own and its attempt's trace context over those
    of the same name (in any case). The job's were checked when it was created."""
    own = dict(request.headers or {})
    request.put_trace_context(own)
    replaced = {name.lower() for name in own}
    return {k: v for k, v in headers.items() if k.lower() not in replaced} | own


@functools.lru_cache(maxsize=1024)
def _parse_url(url: str) -> tuple[Url, str]:
    """Parsed and checked once per distinct URL (most endpoints' URLs do not vary), with
    the Host header it implies."""
    try:
        parsed = parse_url(url)
    except LocationParseError as exc:
        raise InvalidHttpRequest("resolved url is not a valid URL") from exc
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise InvalidHttpRequest("resolved url must be an absolute http:// or https:// URL")
    return parsed, parsed.netloc or ""


def _headers(raw: Mapping[str, Any]) -> dict[str, str]:
    """Resolved headers as strings; CR/LF/NUL would split the request (header injection)."""
    headers = {}
    for name, value in raw.items():
        name = str(name)
        text = value if isinstance(value, str) else json.dumps(value)
        if _FORBIDDEN_IN_HEADERS.search(name) or _FORBIDDEN_IN_HEADERS.search(text):
            # The header name is safe to quote only if it is not the offending part.
            where = "a header name" if _FORBIDDEN_IN_HEADERS.search(name) else f"header {name!r}"
            raise InvalidHttpRequest(f"{where} contains CR, LF or NUL after resolution")
        headers[name] = text
    return headers


def _connection_message(exc: WireError) -> str:
    """The client's reason; the pipeline redacts secret values from it, then cuts it."""
    text = str(exc)
    if isinstance(exc, TlsVerifyFailed):
        return (
            "TLS certificate verification failed: "
            + text.removeprefix("TLS: ").removeprefix("certificate verify failed: ")
            + " (a private CA is trusted through SSL_CERT_FILE)"
        )
    if "refused" in text.lower() and not text.startswith("proxy"):
        return f"connection refused by the target: {text}"
    return f"connection failed: {text}"
