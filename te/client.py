"""The Python SDK: a small client over Task Executor's REST API.

::

    from te.client import Client, ApiError

    client = Client("http://127.0.0.1:8080", "te_...")      # or Client.from_env()
    client.endpoints.create({"name": "hook", "type": "HTTP",
                             "spec": {"url": "https://example.com/hook", "method": "POST"}})
    job = client.jobs.create({"endpoint": "hook", "trigger": "IMMEDIATE", "input": {}})
    done = client.executions.wait(job["execution"]["execution_id"])   # until terminal
    try:
        client.jobs.get("job_missing")
    except ApiError as exc:
        print(exc.status, exc.code, exc.message, exc.request_id)

Every operation of the API has a method here (``client.keys`` manages API keys with an
admin key; ``client.executions.dead_letters()`` lists FAILED executions; pause, resume,
trigger, redrive, retry and cancel are methods of their resource). Every method returns the
API's JSON as plain ``dict``/``list`` values (the shapes of the
OpenAPI document, ``GET /openapi.json``). Any 4xx/5xx raises :class:`ApiError` (a subclass
per status: :class:`NotFound`, :class:`Conflict`...) carrying the error envelope's
``code``, ``message`` and ``request_id``; a server that cannot be reached raises
:class:`TransportError`. ``list_all`` methods follow the ``cursor`` of paginated lists.

Configuration (:meth:`Client.from_env`): ``TE_URL`` and ``TE_API_KEY``, else the TOML file
``TE_CONFIG`` names (default ``~/.config/te/config.toml``) with ``url`` and ``api_key``.
A config file that supplies the key while its group or others may read it is used with a
warning on stderr, as ssh does; :func:`write_config` writes one readable by its owner only.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import time
import tomllib
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import urllib3

DEFAULT_CONFIG = Path("~/.config/te/config.toml")
TERMINAL = frozenset({"SUCCESS", "FAILED", "CANCELLED"})
#: POST /jobs/batch takes at most this many job requests.
MAX_BATCH = 1000
#: The largest request body the API accepts by default (its ``TE_MAX_BODY_BYTES``).
MAX_BODY_BYTES = 1_048_576


class TeError(Exception):
    """Base of everything this module raises."""


class ConfigError(TeError):
    """No URL or API key configured, or an unreadable config file."""


class TransportError(TeError):
    """The server could not be reached, or answered something that is not the API."""


class ApiError(TeError):
    """The API answered with an error status and its envelope.

    ``status`` is the HTTP status; ``code``, ``message`` and ``request_id`` come from the
    ``{"error": {...}}`` envelope; ``body`` is the decoded body (extra fields, e.g. a
    rejected batch's ``items``).
    """

    def __init__(self, status: int, code: str, message: str, request_id: str | None, body: Any):
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.request_id = request_id
        self.body = body


class BadRequest(ApiError):
    """400 or 422: the request was refused as invalid."""


class Unauthorized(ApiError):
    """401: missing or wrong API key."""


class Forbidden(ApiError):
    """403: the API key's scope does not allow the operation (INSUFFICIENT_SCOPE)."""


class NotFound(ApiError):
    """404: no such resource (or route)."""


class Conflict(ApiError):
    """409: the resource is in a state that refuses the operation."""


class RateLimited(ApiError):
    """429: too many requests for this key."""


class ServerError(ApiError):
    """5xx: the service failed or is unavailable (503: retry shortly)."""


_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    422: BadRequest,
    429: RateLimited,
}


def error_from(status: int, body: Any) -> ApiError:
    """The typed error for an error answer (the envelope's fields when it has one)."""
    envelope = body.get("error") if isinstance(body, dict) else None
    if not isinstance(envelope, dict):
        envelope = {"code": "HTTP_ERROR", "message": str(body)[:500] or f"HTTP {status}"}
    kind = _BY_STATUS.get(status, ServerError if status >= 500 else ApiError)
    return kind(
        status,
        str(envelope.get("code", "HTTP_ERROR")),
        str(envelope.get("message", "")),
        envelope.get("request_id"),
        body,
    )


def _warn_on_stderr(message: str) -> None:
    sys.stderr.write(f"te: warning: {message}\n")


def config_path(env: Mapping[str, str] | None = None) -> Path:
    """The config file: the one ``TE_CONFIG`` names, else :data:`DEFAULT_CONFIG`."""
    env = os.environ if env is None else env
    return Path(env.get("TE_CONFIG") or DEFAULT_CONFIG).expanduser()


def load_config(
    env: Mapping[str, str] | None = None, *, warn: Callable[[str], None] = _warn_on_stderr
) -> tuple[str, str]:
    """(url, api_key) from ``TE_URL``/``TE_API_KEY``, else the config file.

    ``warn`` is told (stderr by default) when the file supplies the key while its group or
    others may read it: the key is as good as shared with them.
    """
    env = os.environ if env is None else env
    url, key = env.get("TE_URL"), env.get("TE_API_KEY")
    path = config_path(env)
    if (not url or not key) and path.is_file():
        data = _read_config(path, key_wanted=not key, warn=warn)
        url = url or data.get("url")
        key = key or data.get("api_key")
    if not url or not key:
        raise ConfigError(
            f"set TE_URL and TE_API_KEY, or url and api_key in {path} (or a file named by "
            "TE_CONFIG)"
        )
    return str(url), str(key)


def _read_config(path: Path, *, key_wanted: bool, warn: Callable[[str], None]) -> dict[str, Any]:
    """The config file's settings; ``warn`` is told when the key it supplies (``key_wanted``)
    is readable by its group or others."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        mode = stat.S_IMODE(path.stat().st_mode)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from exc
    if key_wanted and data.get("api_key") and mode & 0o077:
        warn(
            f"{path} holds an API key and is readable by others (mode {mode:04o}); "
            f"run 'chmod 600 {path}'"
        )
    return data


def write_config(path: Path, url: str, api_key: str) -> None:
    """Write ``url`` and ``api_key`` to ``path`` readable by its owner only (0600, in a
    directory it creates 0700); an existing file is replaced and made 0600 too."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    text = f"url = {json.dumps(url)}\napi_key = {json.dumps(api_key)}\n"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        os.fchmod(fd, 0o600)  # the mode above applies only to a file created now
        file.write(text)


class Client:
    """One API: its base URL and key, a pooled connection manager, a timeout."""

    def __init__(self, url: str, api_key: str, *, timeout: float = 60.0) -> None:
        self.url = url.rstrip("/")
        self._headers = {"Authorization": f"Bearer {api_key}", "Accept": "application/json"}
        self._http = urllib3.PoolManager(
            timeout=urllib3.Timeout(connect=10.0, read=timeout), retries=False
        )
        self.endpoints = Endpoints(self, "/endpoints")
        self.configs = Named(self, "/configs")
        self.secrets = Named(self, "/secrets")
        self.payload_specs = Named(self, "/payload-specs")
        #: Fan-out topics; ``jobs.create({"topic": name, ...})`` creates a job per endpoint.
        self.topics = Named(self, "/topics")
        self.jobs = Jobs(self)
        self.executions = Executions(self)
        self.batches = Batches(self)
        self.operations = Operations(self)
        self.keys = Keys(self)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **kwargs: Any) -> Client:
        """A client configured by :func:`load_config`."""
        url, key = load_config(env)
        return cls(url, key, **kwargs)

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        """One call: the decoded JSON answer (None for 204), or a raised error."""
        query = {k: v for k, v in (params or {}).items() if v is not None}
        url = self.url + path + ("?" + urlencode(query) if query else "")
        all_headers = {**self._headers, **(headers or {})}
        data = None
        if body is not None:
            data = encode_body(body)
            all_headers["Content-Type"] = "application/json"
        try:
            response = self._http.request(method, url, body=data, headers=all_headers)
        except urllib3.exceptions.HTTPError as exc:
            raise TransportError(f"cannot reach {self.url}: {exc}") from exc
        return _decode(response.status, response.data)

    def text(self, path: str) -> str:
        """A GET whose answer is text (``/metrics``)."""
        try:
            response = self._http.request("GET", self.url + path, headers=self._headers)
        except urllib3.exceptions.HTTPError as exc:
            raise TransportError(f"cannot reach {self.url}: {exc}") from exc
        if response.status >= 400:
            _decode(response.status, response.data)
        return str(response.data.decode("utf-8"))

    def pages(self, path: str, params: Mapping[str, Any] | None = None) -> Iterator[Any]:
        """Every item of a paginated list, following ``cursor`` to the end."""
        query = dict(params or {})
        while True:
            page = self.request("GET", path, params=query)
            yield from page.get("items", [])
            cursor = page.get("cursor") or page.get("next_cursor")
            if not cursor:
                return
            query["cursor"] = cursor

    def health(self) -> Any:
        return self.request("GET", "/health")

    def metrics(self) -> str:
        """The Prometheus exposition text."""
        return self.text("/metrics")

    def overview(self) -> Any:
        """Counts by status, throughput, lag, workers and per-endpoint outcomes."""
        return self.request("GET", "/overview")

    def openapi(self) -> Any:
        """The OpenAPI 3.1 document describing every route."""
        return self.request("GET", "/openapi.json")


def encode_body(body: Any) -> bytes:
    """A request body as :meth:`Client.request` sends it (its size is what the API limits)."""
    return json.dumps(body).encode("utf-8")


def _decode(status: int, raw: bytes) -> Any:
    if status == 204 or not raw:
        body: Any = None
    else:
        try:
            body = json.loads(raw)
        except ValueError:
            body = raw.decode("utf-8", "replace")
    if status >= 400:
        raise error_from(status, body)
    if isinstance(body, str):
        raise TransportError(f"expected JSON, got: {body[:200]}")
    return body


def _id(value: str) -> str:
    return quote(value, safe="")


class Named:
    """A collection addressed by name: endpoints, configs, secrets, payload specs, topics."""

    def __init__(self, client: Client, path: str) -> None:
        self._client = client
        self.path = path

    def create(self, body: Mapping[str, Any]) -> Any:
        return self._client.request("POST", self.path, body)

    def list(self, *, limit: int | None = None, cursor: str | None = None) -> Any:
        """One page: ``{"items": [...], "cursor": str | None}``."""
        return self._client.request("GET", self.path, params={"limit": limit, "cursor": cursor})

    def list_all(self) -> Iterator[Any]:
        return self._client.pages(self.path)

    def get(self, name: str) -> Any:
        return self._client.request("GET", f"{self.path}/{_id(name)}")

    def replace(self, name: str, body: Mapping[str, Any]) -> Any:
        return self._client.request("PUT", f"{self.path}/{_id(name)}", body)

    def delete(self, name: str) -> None:
        self._client.request("DELETE", f"{self.path}/{_id(name)}")


class Endpoints(Named):
    """``/endpoints``: the named collection, plus pause, resume, redrive and the blocked
    ordering keys (list, skip)."""

    def pause(self, name: str) -> Any:
        """Stop delivering to the endpoint (its executions wait, nothing is lost); the
        endpoint answered shows ``paused_reason`` ``"OPERATOR"`` (``"GONE"`` or
        ``"FAILING"`` when it paused itself before: a pause keeps its first reason)."""
        return self._client.request("POST", f"{self.path}/{_id(name)}/pause")

    def resume(self, name: str) -> Any:
        """Deliver to the endpoint again, whatever paused it (``paused_reason`` null)."""
        return self._client.request("POST", f"{self.path}/{_id(name)}/resume")

    def redrive(
        self,
        name: str,
        *,
        since: str,
        until: str,
        error_type: str | None = None,
        endpoint_version: str | None = None,
    ) -> Any:
        """Requeue FAILED executions created in [since, until) (ISO 8601 with an offset),
        optionally of one last error type: ``{"requeued": n, "more": bool}``; call again
        while ``more``. ``endpoint_version="current"`` delivers them with the endpoint as it
        is now instead of each job's snapshot."""
        body: dict[str, Any] = {"since": since, "until": until}
        if error_type is not None:
            body["error_type"] = error_type
        if endpoint_version is not None:
            body["endpoint_version"] = endpoint_version
        return self._client.request("POST", f"{self.path}/{_id(name)}/redrive", body)

    def blocked_keys(
        self, name: str, *, limit: int | None = None, cursor: str | None = None
    ) -> Any:
        """One page of the endpoint's blocked ordering keys (its ``ordering.on_failure`` is
        ``block`` and their head ended FAILED): ``{"items": [{"key", "execution_id",
        "since"}], "cursor"}``."""
        params = {"state": "blocked", "limit": limit, "cursor": cursor}
        return self._client.request("GET", f"{self.path}/{_id(name)}/ordering-keys", params=params)

    def blocked_keys_all(self, name: str) -> Iterator[Any]:
        return self._client.pages(f"{self.path}/{_id(name)}/ordering-keys", {"state": "blocked"})

    def skip_key(self, name: str, key: str) -> Any:
        """Unblock a blocked ordering key: its failed execution stays FAILED, the key's next
        one starts (409 ORDERING_KEY_NOT_BLOCKED when the key is not blocked)."""
        path = f"{self.path}/{_id(name)}/ordering-keys/{_id(key)}/skip"
        return self._client.request("POST", path)


def trace_headers(traceparent: str | None, tracestate: str | None) -> dict[str, str] | None:
    """The W3C trace context headers of a request that creates jobs (None: none)."""
    if traceparent is None:
        return None
    headers = {"traceparent": traceparent}
    if tracestate is not None:
        headers["tracestate"] = tracestate
    return headers


class Jobs:
    """``/jobs``: create, list (filters ``endpoint``, ``trigger``, ``status``,
    ``idempotency_key``), find by key, read, update, reschedule, cancel, pause, resume,
    trigger (run now)."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def create(
        self,
        body: Mapping[str, Any],
        *,
        traceparent: str | None = None,
        tracestate: str | None = None,
    ) -> Any:
        """``POST /jobs``; ``body`` may carry ``"headers"`` (sent with each delivery). With
        ``"topic"`` instead of ``"endpoint"`` it answers ``{"topic", "jobs"}``: one job per
        endpoint of the topic.
        ``traceparent``/``tracestate``: the W3C trace context the job keeps (each delivery
        attempt then sends the same trace-id with a parent-id of its own)."""
        headers = trace_headers(traceparent, tracestate)
        return self._client.request("POST", "/jobs", body, headers=headers)

    def list(self, *, limit: int | None = None, cursor: str | None = None, **filters: Any) -> Any:
        return self._client.request(
            "GET", "/jobs", params={"limit": limit, "cursor": cursor, **filters}
        )

    def list_all(self, **filters: Any) -> Iterator[Any]:
        return self._client.pages("/jobs", filters)

    def find(self, endpoint: str, idempotency_key: str) -> Any:
        """The job created on ``endpoint`` with ``idempotency_key``, or None."""
        params = {"endpoint": endpoint, "idempotency_key": idempotency_key}
        items = self._client.request("GET", "/jobs", params=params)["items"]
        return items[0] if items else None

    def get(self, job_id: str) -> Any:
        return self._client.request("GET", f"/jobs/{_id(job_id)}")

    def update(self, job_id: str, body: Mapping[str, Any]) -> Any:
        return self._client.request("PUT", f"/jobs/{_id(job_id)}", body)

    def reschedule(
        self, job_id: str, *, run_at: str | None = None, delay: str | None = None
    ) -> Any:
        """Move a DELAYED job not yet started to ``run_at`` (ISO 8601 with an offset) or to
        ``delay`` from now (``"90s"``, ``"1h30m"``); exactly one of them."""
        if (run_at is None) == (delay is None):
            raise ValueError("give exactly one of run_at and delay")
        body = {"run_at": run_at} if run_at is not None else {"delay": delay}
        return self._client.request("PUT", f"/jobs/{_id(job_id)}", body)

    def cancel(self, job_id: str) -> Any:
        return self._client.request("POST", f"/jobs/{_id(job_id)}/cancel")

    def status(self, job_id: str) -> Any:
        return self._client.request("GET", f"/jobs/{_id(job_id)}/status")

    def pause(self, job_id: str) -> Any:
        """Pause an ACTIVE cron job (409 JOB_NOT_PAUSABLE otherwise)."""
        return self._client.request("POST", f"/jobs/{_id(job_id)}/pause")

    def resume(self, job_id: str, *, catch_up: bool = False) -> Any:
        """Resume a paused cron job; ``catch_up`` fires the ticks missed meanwhile."""
        body = {"catch_up": True} if catch_up else None
        return self._client.request("POST", f"/jobs/{_id(job_id)}/resume", body)

    def trigger(self, job_id: str) -> Any:
        """Run an ACTIVE cron job now, outside its schedule: the new execution."""
        return self._client.request("POST", f"/jobs/{_id(job_id)}/trigger")

    def versions(self, job_id: str) -> Iterator[Any]:
        return self._client.pages(f"/jobs/{_id(job_id)}/versions")

    def executions(self, job_id: str, *, status: str | None = None) -> Iterator[Any]:
        return self._client.pages(f"/jobs/{_id(job_id)}/executions", {"status": status})

    def create_batch(
        self,
        jobs: Sequence[Mapping[str, Any]],
        *,
        traceparent: str | None = None,
        tracestate: str | None = None,
        **options: Any,
    ) -> Any:
        """One ``POST /jobs/batch`` (at most :data:`MAX_BATCH` job requests); the trace
        context, as for :meth:`create`, is kept by every job without its own."""
        if len(jobs) > MAX_BATCH:
            raise ValueError(f"a batch holds at most {MAX_BATCH} jobs, got {len(jobs)}")
        body = {"jobs": list(jobs), **options}
        headers = trace_headers(traceparent, tracestate)
        return self._client.request("POST", "/jobs/batch", body, headers=headers)


class Executions:
    """``/executions``: list across jobs (the dead letters are the FAILED ones); one
    execution's read, wait, attempts, logs, cancel, retry."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def list(self, *, limit: int | None = None, cursor: str | None = None, **filters: Any) -> Any:
        """One page, newest first; filters ``status``, ``endpoint``, ``since``, ``until``
        (ISO 8601), ``error_type``."""
        return self._client.request(
            "GET", "/executions", params={"limit": limit, "cursor": cursor, **filters}
        )

    def list_all(self, **filters: Any) -> Iterator[Any]:
        return self._client.pages("/executions", filters)

    def dead_letters(self, **filters: Any) -> Iterator[Any]:
        """Every FAILED execution (with its last error), newest first."""
        return self.list_all(**{**filters, "status": "FAILED"})

    def get(self, execution_id: str, *, wait: int | None = None) -> Any:
        """The execution; with ``wait`` the server answers once terminal or after that many
        seconds (``Prefer: wait=N``, at most 25)."""
        headers = {"Prefer": f"wait={wait}"} if wait else None
        return self._client.request("GET", f"/executions/{_id(execution_id)}", headers=headers)

    def wait(self, execution_id: str, *, timeout: float | None = None, poll: int = 20) -> Any:
        """Long-poll until the execution is terminal (or ``timeout`` seconds passed)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            execution = self.get(execution_id, wait=poll)
            if execution["status"] in TERMINAL:
                return execution
            if deadline is not None and time.monotonic() >= deadline:
                return execution

    def attempts(self, execution_id: str) -> Iterator[Any]:
        return self._client.pages(f"/executions/{_id(execution_id)}/attempts")

    def logs(self, execution_id: str) -> Iterator[Any]:
        return self._client.pages(f"/executions/{_id(execution_id)}/logs")

    def cancel(self, execution_id: str) -> Any:
        return self._client.request("POST", f"/executions/{_id(execution_id)}/cancel")

    def retry(self, execution_id: str, *, endpoint_version: str | None = None) -> Any:
        """Queue a FAILED execution again (409 EXECUTION_NOT_RETRYABLE otherwise);
        ``endpoint_version="current"`` delivers it with the endpoint as it is now."""
        body = None if endpoint_version is None else {"endpoint_version": endpoint_version}
        return self._client.request("POST", f"/executions/{_id(execution_id)}/retry", body)

    def bulk(self, action: str, *, all: bool = False, **filters: Any) -> Any:
        """A bulk ``retry``, ``cancel`` or ``delete`` of the executions ``filters`` match
        (``endpoint``, ``status`` (one or a list), ``error_type``, ``created_after``,
        ``created_before``; ``all=True`` with none): the operation, its first page done.
        Follow it with ``client.operations.wait(op["operation_id"])``."""
        body: dict[str, Any] = {"action": action, "filter": filters}
        if all:
            body["all"] = True
        return self._client.request("POST", "/executions/bulk", body)

    def bulk_count(self, *, all: bool = False, **filters: Any) -> Any:
        """How many executions ``filters`` match now (the filter of :meth:`bulk`), counted
        up to ``limit``: ``{"matched", "more", "limit"}``; ``more`` is true past the limit.
        Changes nothing."""
        body: dict[str, Any] = {"filter": filters}
        if all:
            body["all"] = True
        return self._client.request("POST", "/executions/bulk/count", body)


class Operations:
    """``/operations``: a bulk action's progress (``matched = done + refused``), abort."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def get(self, operation_id: str) -> Any:
        return self._client.request("GET", f"/operations/{_id(operation_id)}")

    def abort(self, operation_id: str) -> Any:
        """Stop a RUNNING operation (409 OPERATION_NOT_RUNNING once DONE or FAILED)."""
        return self._client.request("POST", f"/operations/{_id(operation_id)}/abort")

    def wait(
        self,
        operation_id: str,
        *,
        timeout: float | None = None,
        interval: float = 1.0,
        progress: Callable[[Any], None] | None = None,
    ) -> Any:
        """Poll until the operation is no longer RUNNING (or ``timeout`` seconds passed);
        ``progress`` sees each answer whose counts changed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        last = None
        while True:
            operation = self.get(operation_id)
            counts = (operation["state"], operation["matched"], operation["done"])
            if progress is not None and counts != last:
                progress(operation)
            last = counts
            if operation["state"] != "RUNNING":
                return operation
            if deadline is not None and time.monotonic() >= deadline:
                return operation
            time.sleep(interval)


class Batches:
    """``/batches/{id}``: progress, jobs, cancel."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def get(self, batch_id: str) -> Any:
        return self._client.request("GET", f"/batches/{_id(batch_id)}")

    def jobs(self, batch_id: str, *, status: str | None = None) -> Iterator[Any]:
        """The batch's jobs; ``status`` filters by their execution's status."""
        return self._client.pages(f"/batches/{_id(batch_id)}/jobs", {"status": status})

    def cancel(self, batch_id: str) -> Any:
        return self._client.request("POST", f"/batches/{_id(batch_id)}/cancel")


class Keys:
    """``/keys``: API key administration (an ``admin`` key is needed)."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def create(self, name: str, scope: str) -> Any:
        """A new key with ``scope`` ``read``, ``write`` or ``admin``; the answer's
        ``api_key`` is the key itself, shown this once."""
        return self._client.request("POST", "/keys", {"name": name, "scope": scope})

    def list(self, *, limit: int | None = None, cursor: str | None = None) -> Any:
        return self._client.request("GET", "/keys", params={"limit": limit, "cursor": cursor})

    def list_all(self) -> Iterator[Any]:
        """Every key, revoked ones included (never a key or its hash)."""
        return self._client.pages("/keys")

    def revoke(self, key_id: str) -> Any:
        return self._client.request("POST", f"/keys/{_id(key_id)}/revoke")
