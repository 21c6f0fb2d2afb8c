"""aiohttp behind the interface of :class:`chalicelib.worker.dispatchers.wire.HttpClient`.

Only for the A/B in ``http_client_ab.py``: :class:`AiohttpClient` takes the same
``request(origin, method, target, headers, body, timeout=, body_limit=)`` call, returns the
same :class:`Response` and raises the same :class:`WireError` kinds, so the dispatcher
(URL parsing, address policy, classification) and the delivery loop stay byte for byte the
same on both sides; only the HTTP/1.1 client differs. One ``ClientSession`` per client with
a ``TCPConnector`` sized to the concurrency, keep-alive, no redirects, no cookies.
"""

from __future__ import annotations

import ssl
from collections.abc import Sequence

import aiohttp
from yarl import URL

from chalicelib.worker.dispatchers.wire import (
    IDLE_TTL_S,
    ConnectFailed,
    Origin,
    ProtocolError,
    Response,
    ResponseTimeout,
)


class AiohttpClient:
    """The wire client's interface over one aiohttp session (built on first use)."""

    def __init__(
        self, *, max_idle_per_origin: int = 50, ssl_context: ssl.SSLContext | None = None
    ) -> None:
        self._limit = max_idle_per_origin
        self._ssl_context = ssl_context
        self._session: aiohttp.ClientSession | None = None

    async def request(
        self,
        origin: Origin,
        method: str,
        target: str,
        headers: Sequence[tuple[str, str]],
        body: bytes | None,
        *,
        timeout: float,
        body_limit: int,
    ) -> Response:
        host = f"[{origin.address}]" if ":" in origin.address else origin.address
        url = URL(f"{origin.scheme}://{host}:{origin.port}{target}", encoded=True)
        extra = {"server_hostname": origin.server_hostname} if origin.scheme == "https" else {}
        try:
            async with self._open().request(
                method,
                url,
                headers=headers,
                data=body,
                allow_redirects=False,
                timeout=aiohttp.ClientTimeout(total=timeout),
                **extra,  # type: ignore[arg-type]
            ) as resp:
                data = await resp.content.read(body_limit)
                headers = {name.lower(): value for name, value in resp.headers.items()}
                return Response(resp.status, resp.reason or "", headers, data)
        except TimeoutError:
            raise ResponseTimeout(f"no response within {int(timeout * 1000)} ms") from None
        except aiohttp.ClientConnectorError as exc:
            raise ConnectFailed(str(exc.os_error or exc)) from exc
        except aiohttp.ClientError as exc:
            raise ProtocolError(type(exc).__name__) from exc

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(
                limit=self._limit,
                limit_per_host=self._limit,
                keepalive_timeout=IDLE_TTL_S,
                ssl=self._ssl_context if self._ssl_context is not None else True,
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                cookie_jar=aiohttp.DummyCookieJar(),
                auto_decompress=False,
                skip_auto_headers=("User-Agent", "Accept-Encoding"),
            )
        return self._session
