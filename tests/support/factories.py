"""Request bodies for the catalogue and jobs, and registering an endpoint through the API.

Bodies are plain dicts, so each client sends them its own way (``ApiClient.post`` in
process, ``Stack.ok`` over HTTP, ``RecordingApi.call``); :func:`register_endpoint` is the
in-process shortcut most integration tests want.
"""

from __future__ import annotations

from typing import Any, Protocol

#: Nothing listens on port 9 (discard): for endpoints a test registers but never delivers to.
UNREACHABLE_URL = "http://127.0.0.1:9/"


class _Api(Protocol):
    def post(self, path: str, body: Any = None, **kw: Any) -> Any: ...


def retry_policy(
    max_attempts: int = 1,
    backoff: str = "fixed",
    initial_delay_ms: int = 0,
    max_delay_ms: int = 60000,
) -> dict[str, Any]:
    """A complete retry policy (the registration's ``retry_policy``)."""
    return {
        "max_attempts": max_attempts,
        "backoff": backoff,
        "initial_delay_ms": initial_delay_ms,
        "max_delay_ms": max_delay_ms,
    }


def endpoint_body(
    name: str,
    url: str = UNREACHABLE_URL,
    *,
    endpoint_type: str = "HTTP",
    spec: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """The body of ``POST /endpoints``: an HTTP POST to ``url`` unless ``spec`` is given.

    ``extra`` adds top-level fields (``retry_policy``, ``payload_spec``, ``on_success``...).
    """
    if spec is None:
        spec = {"url": url, "method": "POST"}
    return {"name": name, "type": endpoint_type, "spec": spec, **extra}


def immediate_job(endpoint: str, key: str, **extra: Any) -> dict[str, Any]:
    """The body of ``POST /jobs`` for an IMMEDIATE job; ``extra`` adds fields (``input``...)."""
    return {"endpoint": endpoint, "trigger": "IMMEDIATE", "idempotency_key": key, **extra}


def register_endpoint(api: _Api, name: str, url: str = UNREACHABLE_URL, **kw: Any) -> Any:
    """``POST /endpoints`` with :func:`endpoint_body` through ``api``; asserts 201."""
    reply = api.post("/endpoints", endpoint_body(name, url, **kw))
    assert reply.status == 201, reply.body
    return reply.body
