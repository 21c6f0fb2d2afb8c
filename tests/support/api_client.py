"""The app called in-process through ``chalice.test.Client`` (:class:`ApiClient`, behind
the ``api`` fixture), and what it answers (:class:`Reply`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tests.support.environment import BOOTSTRAP_KEY


@dataclass
class Reply:
    status: int
    body: Any
    headers: dict[str, str]

    @property
    def error_code(self) -> str | None:
        if isinstance(self.body, dict) and "error" in self.body:
            return str(self.body["error"]["code"])
        return None


class ApiClient:
    """The app through ``chalice.test.Client`` (the same path as API Gateway events)."""

    def __init__(
        self, client: Any, key: str | None = BOOTSTRAP_KEY, *, app: Any = None, roots: Any = None
    ) -> None:
        self._client = client
        self.key = key
        self.app = app
        self._roots = roots

    def threadsafe(self) -> ApiClient:
        """The app's ``current_request`` made thread-local, as the local server makes it
        (chalicelib.local.server): otherwise calls from several threads at once share one
        request object, and a handler may read a neighbour's body (its idempotency key).
        For tests whose threads call the API concurrently; harmless to the others."""
        from chalice.local import CustomLocalChalice, LocalChalice

        if not isinstance(self.app, LocalChalice):
            CustomLocalChalice.__bases__ = (LocalChalice, self.app.__class__)
            self.app.__class__ = CustomLocalChalice
        return self

    def restart(self) -> None:
        """A new API process (the environment changed): the app serves from a new root."""
        from chalicelib.wiring.api import ApiRoot

        self.app.use(ApiRoot(self._roots.new()))

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        raw: bytes | None = None,
        headers: dict[str, str] | None = None,
        auth: bool = True,
    ) -> Reply:
        all_headers = {"content-type": "application/json"}
        if auth and self.key:
            all_headers["authorization"] = f"Bearer {self.key}"
        all_headers.update(headers or {})
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else b"")
        response = getattr(self._client.http, method.lower())(path, headers=all_headers, body=data)
        text = response.body.decode("utf-8") if response.body else ""
        try:
            parsed = json.loads(text) if text else None
        except json.JSONDecodeError:
            parsed = text
        return Reply(
            response.status_code, parsed, {k.lower(): v for k, v in response.headers.items()}
        )

    def get(self, path: str, **kw: Any) -> Reply:
        return self.request("GET", path, **kw)

    def post(self, path: str, body: Any = None, **kw: Any) -> Reply:
        return self.request("POST", path, body, **kw)

    def put(self, path: str, body: Any = None, **kw: Any) -> Reply:
        return self.request("PUT", path, body, **kw)

    def delete(self, path: str, **kw: Any) -> Reply:
        return self.request("DELETE", path, **kw)
