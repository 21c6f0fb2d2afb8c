"""Redis Stream delivery, exactly once per execution, with pooled redis-py clients per URL.

One Lua script checks a per-execution dedup key and XADDs atomically: a retried or
reclaimed execution whose first XADD did happen (the worker died, or its finalize was lost)
gets the original entry id back instead of appending a second entry. Dedup keys expire after
:data:`DEDUP_TTL_SEC`, longer than any retry horizon (reclaim timeout plus backoff).
``redis`` is imported on first use so the API Lambda never pays for it.
"""

from __future__ import annotations

import json
import socket
import threading
from typing import Any

from chalicelib.domain.delivery import (
    DeliveryErrorType,
    DeliveryOutcome,
    DeliveryRequest,
    failed,
    succeeded,
)
from chalicelib.domain.job_headers import REDIS_FIELD_PREFIX
from chalicelib.domain.signing import stream_payload, webhook_headers
from chalicelib.worker.dispatchers.redis_guard import connection_pool
from chalicelib.worker.ssrf import BlockedTarget, Resolver

DEFAULT_TIMEOUT_MS = 3000
DEDUP_TTL_SEC = 7 * 24 * 3600

# KEYS[1] stream, KEYS[2] dedup key. ARGV[1] MAXLEN ('' = none), ARGV[2] '1' for '~',
# ARGV[3] dedup TTL seconds, ARGV[4..] field/value pairs. Returns {entry id, 1 if repeat}.
XADD_ONCE = """
local seen = redis.call('GET', KEYS[2])
if seen then return {seen, 1} end
local args = {'XADD', KEYS[1]}
if ARGV[1] ~= '' then
  table.insert(args, 'MAXLEN')
  if ARGV[2] == '1' then table.insert(args, '~') end
  table.insert(args, ARGV[1])
end
table.insert(args, '*')
for i = 4, #ARGV do table.insert(args, ARGV[i]) end
local id = redis.call(unpack(args))
redis.call('SET', KEYS[2], id, 'EX', tonumber(ARGV[3]))
return {id, 0}
"""

ClientKey = tuple[str, int]


class InvalidStreamSpec(Exception):
    """The resolved spec cannot be sent (no stream, bad max_len); never retried."""


class RedisStreamDispatcher:
    """Appends one stream entry per execution (the first attempt that reaches Redis).

    With ``allow_private`` off, ``redis_url`` obeys the address policy like an HTTP URL:
    resolved through ``resolver``, every answer public, the checked address connected to
    (:mod:`.redis_guard`); ``unix://`` is refused.
    """

    def __init__(self, *, allow_private: bool, resolver: Resolver = socket.getaddrinfo) -> None:
        self._allow_private = allow_private
        self._resolver = resolver
        self._lock = threading.Lock()
        self._scripts: dict[ClientKey, Any] = {}

    def dispatch(self, request: DeliveryRequest) -> DeliveryOutcome:
        from redis.exceptions import ConnectionError as RedisConnectionError
        from redis.exceptions import RedisError
        from redis.exceptions import TimeoutError as RedisTimeout

        spec = request.spec
        timeout_ms = int(spec.get("timeout_ms") or DEFAULT_TIMEOUT_MS)
        try:
            stream, args = _script_args(request)
            script = self._script(str(spec.get("redis_url") or ""), timeout_ms)
            entry_id, _ = script(keys=[stream, dedup_key(stream, request)], args=args)
        except InvalidStreamSpec as exc:
            return failed(DeliveryErrorType.STREAM_ERROR, str(exc), retryable=False)
        except BlockedTarget as exc:
            return failed(DeliveryErrorType.CONNECTION_ERROR, str(exc), retryable=False)
        except ValueError as exc:  # redis-py rejects a malformed URL this way
            return failed(
                DeliveryErrorType.CONNECTION_ERROR, f"invalid redis_url: {exc}", retryable=False
            )
        except TypeError as exc:
            # redis-py hands redis_url's query parameters to its connection class as keyword
            # arguments: one it does not know fails here, and again on every retry.
            return failed(
                DeliveryErrorType.CONNECTION_ERROR,
                f"invalid redis_url: a query parameter is not a Redis option ({exc})",
                retryable=False,
            )
        except RedisTimeout:
            return failed(DeliveryErrorType.TIMEOUT, f"no reply within {timeout_ms} ms")
        except RedisConnectionError as exc:
            return failed(DeliveryErrorType.CONNECTION_ERROR, f"cannot reach Redis: {exc}")
        except RedisError as exc:
            return failed(DeliveryErrorType.STREAM_ERROR, f"XADD failed: {exc}")
        return succeeded({"message_id": _text(entry_id), "stream": stream})

    def _script(self, url: str, timeout_ms: int) -> Any:
        """The XADD-once script bound to a pooled client for ``url`` (EVALSHA, cached)."""
        import redis

        with self._lock:
            script = self._scripts.get((url, timeout_ms))
            if script is None:
                pool = connection_pool(
                    url,
                    allow_private=self._allow_private,
                    resolver=self._resolver,
                    socket_timeout=timeout_ms / 1000,
                    socket_connect_timeout=timeout_ms / 1000,
                    decode_responses=True,
                )
                client = redis.Redis(connection_pool=pool)
                try:
                    script = client.register_script(XADD_ONCE)
                except LookupError as exc:  # redis-py encodes the script with ?encoding=
                    raise ValueError(f"unknown encoding ({exc})") from None
                self._scripts[(url, timeout_ms)] = script
            return script

    def close(self) -> None:
        with self._lock:
            scripts, self._scripts = list(self._scripts.values()), {}
        for script in scripts:
            script.registered_client.close()


def dedup_key(stream: str, request: DeliveryRequest) -> str:
    """Where the entry id of an execution's XADD is remembered."""
    return f"{stream}:te-dedup:{request.execution_id}"


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _field_value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def _script_args(request: DeliveryRequest) -> tuple[str, list[str]]:
    spec = request.spec
    stream = _stream(spec)
    max_len = _max_len(spec)
    approximate = spec.get("approximate_trimming", True) is not False
    args = [max_len, "1" if approximate else "0", str(DEDUP_TTL_SEC)]
    for name, value in _fields(request).items():
        args += [name, value]
    return stream, args


def _stream(spec: dict[str, Any]) -> str:
    stream = spec.get("stream")
    if not isinstance(stream, str) or not stream:
        raise InvalidStreamSpec("resolved stream name is empty or not a string")
    return stream


def _max_len(spec: dict[str, Any]) -> str:
    """The MAXLEN argument of the script: the trim length, or '' for none."""
    max_len = spec.get("max_len")
    if max_len is None:
        return ""
    if isinstance(max_len, bool) or not str(max_len).isdigit():
        raise InvalidStreamSpec("resolved max_len is not a non-negative integer")
    return str(max_len)


def _fields(request: DeliveryRequest) -> dict[str, str]:
    """The entry's fields: the template's, the job's own headers as ``header:<name>``, the
    trace context, then ours, and the signature over all of them."""
    fields = {
        str(k): _field_value(v) for k, v in (request.spec.get("fields_template") or {}).items()
    }
    if request.headers:  # the job's own headers, as fields "header:<name>"
        fields.update((REDIS_FIELD_PREFIX + k, v) for k, v in request.headers.items())
    request.put_trace_context(fields)
    # Ours win over same-named template fields: receivers rely on them to deduplicate.
    fields["execution_id"] = request.execution_id
    fields["attempt"] = str(request.attempt)
    fields.update(webhook_headers(request.signing, request.execution_id, stream_payload(fields)))
    return fields
