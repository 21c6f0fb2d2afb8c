"""The asyncio HTTP/1.1 client against real loopback servers that send scripted bytes."""

from __future__ import annotations

import asyncio
import datetime
import socket
import ssl
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

import pytest

from chalicelib.worker.dispatchers import wire
from chalicelib.worker.dispatchers.wire import (
    ConnectFailed,
    HttpClient,
    Origin,
    ProtocolError,
    Proxy,
    Response,
    ResponseTimeout,
)
from tests.support.served import free_port

T = TypeVar("T")
After = Literal["keep", "close", "reset", "hang"]
OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
HOST = [("Host", "sink.test")]


@dataclass
class Reply:
    """What the server does with one request: send ``data``, then keep the connection,
    close it (FIN), reset it (RST) or never answer (``hang``: ``data`` is not sent)."""

    data: bytes = b""
    after: After = "keep"
    trickle: bool = False  # one byte per write, to split the response across reads


@dataclass
class ScriptedServer:
    """A loopback server answering the n-th request (on any connection) with replies[n]."""

    replies: list[Reply | bytes]
    tls: ssl.SSLContext | None = None
    connections: int = 0
    requests: list[tuple[int, bytes]] = field(default_factory=list)  # (connection, raw)
    client_closed: set[int] = field(default_factory=set)  # connections the client ended
    port: int = 0

    async def __aenter__(self) -> ScriptedServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.tls)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._server.close()

    def origin(self, scheme: str = "http", server_hostname: str = "sink.test") -> Origin:
        return Origin(scheme, "127.0.0.1", self.port, server_hostname)

    def raw(self, index: int) -> bytes:
        return self.requests[index][1]

    async def wait_closed_by_client(self, conn: int) -> None:
        for _ in range(200):
            if conn in self.client_closed:
                return
            await asyncio.sleep(0.005)
        raise AssertionError(f"connection {conn} still open")

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = self.connections
        self.connections += 1
        try:
            while await self._answer(conn, reader, writer):
                pass
        except (ConnectionError, ssl.SSLError):
            self.client_closed.add(conn)
        finally:
            writer.transport.abort()

    async def _answer(
        self, conn: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        request = await read_request(reader)
        if request is None:
            self.client_closed.add(conn)
            return False
        self.requests.append((conn, request))
        item = self.replies.pop(0)
        reply = item if isinstance(item, Reply) else Reply(item)
        if reply.after == "hang":
            await reader.read()
            self.client_closed.add(conn)
            return False
        pieces = [reply.data[i : i + 1] for i in range(len(reply.data))] if reply.trickle else []
        for piece in pieces or [reply.data]:
            writer.write(piece)
            await writer.drain()
            if reply.trickle:
                await asyncio.sleep(0.0005)
        if reply.after == "reset":
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        return reply.after == "keep"


async def read_request(reader: asyncio.StreamReader) -> bytes | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    length = 0
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return head + await reader.readexactly(length)


def run(test: Callable[[], Awaitable[T]]) -> T:
    """Run one test's coroutine on a fresh loop, bounded so a bug cannot hang the suite."""

    async def bounded() -> T:
        return await asyncio.wait_for(test(), 10)

    return asyncio.run(bounded())


async def get(
    client: HttpClient, server: ScriptedServer, method: str = "GET", **kwargs: Any
) -> Response:
    options: dict[str, Any] = {"timeout": 2.0, "body_limit": 4096, "body": None} | kwargs
    return await client.request(server.origin(), method, "/hook", HOST, **options)


def serve(
    replies: list[Reply | bytes],
    body: Callable[[HttpClient, ScriptedServer], Awaitable[None]],
    **client_options: Any,
) -> ScriptedServer:
    """Run ``body`` against a scripted server with a fresh client; returns the server."""

    async def session() -> ScriptedServer:
        client = HttpClient(**client_options)
        async with ScriptedServer(replies) as server:
            try:
                await body(client, server)
            finally:
                await client.close()
        return server

    return run(session)


# --- requests as sent -------------------------------------------------------------------


def test_a_simple_exchange_reads_status_reason_headers_and_body() -> None:
    reply = b"HTTP/1.1 201 Created\r\nContent-Length: 3\r\n\r\nyes"

    async def body(client: HttpClient, server: ScriptedServer) -> None:
        response = await get(client, server, "POST", body=b"{}")
        assert response == Response(201, "Created", {"content-length": "3"}, b"yes")

    serve([reply], body)


def test_headers_are_lower_cased_and_repeats_joined() -> None:
    reply = (
        b"HTTP/1.1 200 OK\r\nX-One:  a \r\nSet-Cookie: a=1\r\nset-cookie: b=2\r\n"
        b"X-Folded: one\r\n two\r\nContent-Length: 3\r\n\r\nyes"
    )

    async def body(client: HttpClient, server: ScriptedServer) -> None:
        response = await get(client, server)
        assert response.body == b"yes"
        assert response.headers == {
            "x-one": "a",
            "set-cookie": "a=1, b=2",
            "x-folded": "one two",
            "content-length": "3",
        }

    serve([reply], body)


def test_request_bytes_carry_our_framing_only() -> None:
    smuggling = [
        ("Host", "sink.test:8443"),
        ("Content-Length", "999"),
        ("Transfer-Encoding", "chunked"),
        ("Connection", "close"),
        ("X-Custom", "caf\u00e9"),
    ]

    async def body(client: HttpClient, server: ScriptedServer) -> None:
        origin = server.origin()
        await client.request(
            origin, "POST", "/a?b=1", smuggling, b"hello", timeout=2, body_limit=10
        )
        await client.request(origin, "POST", "/empty", HOST, None, timeout=2, body_limit=10)
        await client.request(origin, "GET", "/get", HOST, None, timeout=2, body_limit=10)

    server = serve([OK, OK, OK], body)
    assert server.raw(0) == (
        b"POST /a?b=1 HTTP/1.1\r\nHost: sink.test:8443\r\nX-Custom: caf\xc3\xa9\r\n"
        b"Content-Length: 5\r\n\r\nhello"
    )
    assert server.raw(1) == b"POST /empty HTTP/1.1\r\nHost: sink.test\r\nContent-Length: 0\r\n\r\n"
    assert server.raw(2) == b"GET /get HTTP/1.1\r\nHost: sink.test\r\n\r\n"


@pytest.mark.parametrize(
    ("headers", "target", "message"),
    [
        ([("Host", "a"), ("X-Bad", "v\r\nInjected: 1")], "/", "CR, LF or NUL"),
        ([("Host", "a"), ("X-Bad\n", "v")], "/", "CR, LF or NUL"),
        ([("Host", "a"), ("X-Bad", "v\r")], "/", "CR, LF or NUL"),
        ([("Host", "a"), ("X-Bad", "v\0")], "/", "CR, LF or NUL"),
        (HOST, "/a\r\n", "CR, LF or NUL"),
        (HOST, "/a b", "contains a space"),
    ],
)
def test_control_characters_are_refused_before_connecting(
    headers: list[tuple[str, str]], target: str, message: str
) -> None:
    async def body() -> None:
        client = HttpClient()
        origin = Origin("http", "127.0.0.1", 9, "a")  # never reached
        with pytest.raises(ValueError, match=message):
            await client.request(origin, "GET", target, headers, None, timeout=1, body_limit=1)

    run(body)


# --- keep-alive -------------------------------------------------------------------------


def test_keep_alive_reuses_one_connection() -> None:
    async def body(client: HttpClient, server: ScriptedServer) -> None:
        for _ in range(3):
            assert (await get(client, server)).body == b"ok"

    server = serve([OK, OK, OK], body)
    assert server.connections == 1
    assert [conn for conn, _ in server.requests] == [0, 0, 0]


def test_idle_connections_beyond_the_cap_are_closed() -> None:
    async def body(client: HttpClient, server: ScriptedServer) -> None:
        await asyncio.gather(*(get(client, server) for _ in range(3)))
        await server.wait_closed_by_client(2)  # the last to finish found the pool full
        assert len(server.client_closed) == 2
        await asyncio.gather(*(get(client, server) for _ in range(2)))

    server = serve([OK] * 5, body, max_idle_per_origin=1)
    assert server.connections == 4  # three at once, then one reused and one new


def test_http_1_0_response_is_not_reused() -> None:
    async def body(client: HttpClient, server: ScriptedServer) -> None:
        assert (await get(client, server)).body == b"ok"
        await server.wait_closed_by_client(0)
        assert (await get(client, server)).body == b"ok"

    server = serve([OK.replace(b"1.1", b"1.0"), OK], body)
    assert server.connections == 2


def test_http_1_0_keep_alive_is_reused() -> None:
    reply = b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 2\r\n\r\nok"

    async def body(client: HttpClient, server: ScriptedServer) -> None:
        await get(client, server)
        await get(client, server)

    assert serve([reply, OK], body).connections == 1


def test_connection_close_is_honoured() -> None:
    reply = b"HTTP/1.1 200 OK\r\nConnection: keep-alive, close\r\nContent-Length: 2\r\n\r\nok"

    async def body(client: HttpClient, server: ScriptedServer) -> None:
        await get(client, server)
        await server.wait_closed_by_client(0)
        await get(client, server)

    assert serve([reply, OK], body).connections == 2


def test_server_closing_an_idle_connection_is_transparent() -> None:
    async def body(client: HttpClient, server: ScriptedServer) -> None:
        assert (await get(client, server)).body == b"ok"
        await asyncio.sleep(0.05)  # the client sees the FIN while the connection is idle
        assert (await get(client, server)).body == b"ok"

    server = serve([Reply(OK, "close"), OK], body)
    assert server.connections == 2
    assert len(server.requests) == 2


@pytest.mark.parametrize("after", ["reset", "close"])
def test_reused_connection_failing_after_the_request_is_not_sent_again(after: After) -> None:
    """One attempt, one send: the server read the request, then the connection ended
    without an answer; the client reports it instead of sending it again."""

    async def body(client: HttpClient, server: ScriptedServer) -> None:
        await get(client, server)
        with pytest.raises(ProtocolError, match="connection closed before a response"):
            await get(client, server, "POST", body=b"x")

    server = serve([OK, Reply(b"", after), OK], body)
    assert [conn for conn, _ in server.requests] == [0, 0]


def test_idle_connection_past_its_ttl_is_not_reused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Servers close idle keep-alive connections after a few seconds; one idle longer than
    the client's TTL is replaced instead of racing that close."""
    monkeypatch.setattr(wire, "IDLE_TTL_S", 0.05)

    async def body(client: HttpClient, server: ScriptedServer) -> None:
        await get(client, server)
        await get(client, server)  # reused: within the TTL
        await asyncio.sleep(0.1)
        await get(client, server)

    server = serve([OK, OK, OK], body)
    assert [conn for conn, _ in server.requests] == [0, 0, 1]


def test_fresh_connection_closed_before_a_response_is_a_protocol_error() -> None:
    async def body(client: HttpClient, server: ScriptedServer) -> None:
        with pytest.raises(ProtocolError, match="connection closed before a response"):
            await get(client, server)

    server = serve([Reply(b"", "close")], body)
    assert server.connections == 1  # not retried


# --- body framing -----------------------------------------------------------------------

CHUNKED = (
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
    b"5;name=value\r\nhello\r\n6 ; x\r\n world\r\n0\r\nX-Trailer: t\r\nX-Other: u\r\n\r\n"
)


@pytest.mark.parametrize("trickle", [False, True], ids=["whole", "byte-by-byte"])
def test_chunked_body_is_decoded_and_the_connection_reused(trickle: bool) -> None:
    async def body(client: HttpClient, server: ScriptedServer) -> None:
        assert (await get(client, server)).body == b"hello world"
        assert (await get(client, server)).body == b"ok"

    server = serve([Reply(CHUNKED, trickle=trickle), OK], body)
    assert server.connections == 1


def test_chunked_body_without_trailers() -> None:
    reply = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n0\r\n\r\n"

    async def body(client: HttpClient, server: ScriptedServer) -> None:
        assert (await get(client, server)).body == b"ab"
        assert (await get(client, server)).body == b"ok"

    assert serve([reply, OK], body).connections == 1


def test_body_without_length_is_read_until_close() -> None:
    async def body(client: HttpClient, server: ScriptedServer) -> None:
        response = await get(client, server)
        assert response.body == b"all of it"
        assert (await get(client, server)).body == b"ok"

    reply = Reply(b"HTTP/1.1 200 OK\r\n\r\nall of it", "close", trickle=True)
    assert serve([reply, OK], body).connections == 2


@pytest.mark.parametrize(
    ("method", "reply"),
    [
        ("HEAD", b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n"),
        ("GET", b"HTTP/1.1 204 No Content\r\nContent-Length: 100\r\n\r\n"),
        ("GET", b"HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n"),
    ],
)
def test_responses_without_a_body(method: str, reply: bytes) -> None:
    async def body(client: HttpClient, server: ScriptedServer) -> None:
        assert (await get(client, server, method)).body == b""
        assert (await get(client, server)).body == b"ok"  # nothing was taken as a body

    assert serve([reply, OK], body).connections == 1


def test_interim_responses_are_skipped() -> None:
    reply = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n" + OK

    async def body(client: HttpClient, server: ScriptedServer) -> None:
        response = await get(client, server)
        assert (response.status, response.headers, response.body) == (
            200,
            {"content-length": "2"},
            b"ok",
        )

    serve([reply], body)


_CHUNK = b"10000\r\n" + b"x" * 0x10000 + b"\r\n"


@pytest.mark.parametrize(
    ("response", "connections"),
    [
        # a small excess is read and dropped: the connection is reused
        (b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + b"x" * 1000, 1),
        # a large one would cost more to drain than a new connection
        (b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n" + b"x" * 1_000_000, 2),
        # chunked, total unknown: given up once the excess passes the drain limit
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + _CHUNK * 4 + b"0\r\n\r\n",
            2,
        ),
    ],
    ids=["small-excess-drained", "large-excess-dropped", "large-chunked-excess-dropped"],
)
def test_body_beyond_the_limit(response: bytes, connections: int) -> None:
    async def body(client: HttpClient, server: ScriptedServer) -> None:
        assert (await get(client, server, body_limit=10)).body == b"x" * 10
        assert (await get(client, server)).body == b"ok"

    assert serve([response, OK], body).connections == connections


def test_body_read_until_close_stops_at_the_limit() -> None:
    async def body(client: HttpClient, server: ScriptedServer) -> None:
        assert (await get(client, server, body_limit=4)).body == b"0123"
        await server.wait_closed_by_client(0)  # not drained: the server never closes

    serve([b"HTTP/1.1 200 OK\r\n\r\n0123456789"], body)


# --- broken responses -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (Reply(b"HTTP/1.1 OK\r\n\r\n"), "malformed status line"),
        (Reply(b"ICY 200 OK\r\n\r\n"), "malformed status line"),
        (Reply(b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n"), "malformed header line"),
        (Reply(b"HTTP/1.1 200 OK\r\nX: " + b"a" * 70_000 + b"\r\n\r\n"), "exceed 64 KiB"),
        (Reply(b"HTTP/1.1 200 OK\r\nX: " + b"a" * 70_000), "exceed 64 KiB"),
        (Reply(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", "close"), "mid-response"),
        (Reply(b"HTTP/1.1 200 OK\r\nContent-Length: 1, 2\r\n\r\n"), "invalid Content-Length"),
        (Reply(b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n"), "invalid Content-Length"),
        (Reply(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"), "chunk size"),
        (
            Reply(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nabc"),
            "malformed chunk",
        ),
        (Reply(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", "reset"), "mid-response"),
    ],
)
def test_broken_responses_are_protocol_errors(reply: Reply, message: str) -> None:
    async def body(client: HttpClient, server: ScriptedServer) -> None:
        with pytest.raises(ProtocolError, match=message):
            await get(client, server)
        assert (await get(client, server)).body == b"ok"  # a broken connection isn't reused

    assert serve([reply, OK], body).connections == 2


# --- timeouts, cancellation, connect failures -------------------------------------------


def test_no_answer_times_out_and_the_connection_is_dropped() -> None:
    async def body(client: HttpClient, server: ScriptedServer) -> None:
        with pytest.raises(ResponseTimeout, match="no response within 200 ms"):
            await get(client, server, timeout=0.2)
        # The client gave up on the connection (the server saw it closed), not the server.
        await server.wait_closed_by_client(0)
        assert (await get(client, server)).body == b"ok"

    server = serve([Reply(after="hang"), OK], body)
    assert server.connections == 2


def test_cancellation_closes_the_connection_and_propagates() -> None:
    async def body(client: HttpClient, server: ScriptedServer) -> None:
        task = asyncio.create_task(get(client, server))
        while not server.requests:
            await asyncio.sleep(0.005)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await server.wait_closed_by_client(0)

    serve([Reply(after="hang")], body)


def test_refused_port_is_connect_failed() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, never listening: connecting is refused

        async def body() -> None:
            client = HttpClient()
            with pytest.raises(ConnectFailed, match=r"^connection refused$"):
                await client.request(
                    Origin("http", "127.0.0.1", port, "x"),
                    "GET",
                    "/",
                    HOST,
                    None,
                    timeout=2,
                    body_limit=1,
                )

        run(body)


def test_close_closes_idle_connections() -> None:
    async def body(client: HttpClient, server: ScriptedServer) -> None:
        await get(client, server)
        await client.close()
        await server.wait_closed_by_client(0)
        with pytest.raises(RuntimeError, match="closed"):
            await get(client, server)

    serve([OK], body)


# --- TLS --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Certificate:
    cert_pem: bytes
    cert_file: Path
    key_file: Path


@pytest.fixture(scope="module")
def localhost_cert(tmp_path_factory: pytest.TempPathFactory) -> Certificate:
    """A self-signed certificate for "localhost" (CN and SAN)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    folder = tmp_path_factory.mktemp("tls")
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    (folder / "cert.pem").write_bytes(cert_pem)
    (folder / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return Certificate(cert_pem, folder / "cert.pem", folder / "key.pem")


def _tls_pair(cert: Certificate) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert.cert_file, cert.key_file)
    client = ssl.create_default_context(cadata=cert.cert_pem.decode())
    return server, client


def test_tls_exchange_verifies_the_server_name(localhost_cert: Certificate) -> None:
    server_tls, client_tls = _tls_pair(localhost_cert)

    async def body() -> None:
        client = HttpClient(ssl_context=client_tls)
        async with ScriptedServer([OK, OK], tls=server_tls) as server:
            try:
                for _ in range(2):
                    response = await client.request(
                        server.origin("https", "localhost"),
                        "GET",
                        "/",
                        HOST,
                        None,
                        timeout=2,
                        body_limit=10,
                    )
                    assert response.body == b"ok"
                assert server.connections == 1
            finally:
                await client.close()
            await server.wait_closed_by_client(0)

    run(body)


def test_tls_with_the_wrong_server_name_is_connect_failed(localhost_cert: Certificate) -> None:
    server_tls, client_tls = _tls_pair(localhost_cert)

    async def body() -> None:
        client = HttpClient(ssl_context=client_tls)
        async with ScriptedServer([], tls=server_tls) as server:
            with pytest.raises(ConnectFailed, match=r"^TLS: certificate verify failed: ") as info:
                await client.request(
                    server.origin("https", "wrong.example"),
                    "GET",
                    "/",
                    HOST,
                    None,
                    timeout=2,
                    body_limit=10,
                )
            assert "wrong.example" in str(info.value)
            assert not server.requests

    run(body)


# --- through a proxy --------------------------------------------------------------------


def _via(server: ScriptedServer, scheme: str, authorization: str | None = None) -> Origin:
    """An origin at a (never contacted) address, through ``server`` as the proxy."""
    port = 8443 if scheme == "https" else 8080
    return Origin(
        scheme, "10.9.8.7", port, "hooks.test", Proxy("127.0.0.1", server.port, authorization)
    )


def test_http_through_a_proxy_is_sent_in_absolute_form_on_a_kept_connection() -> None:
    async def body(client: HttpClient, server: ScriptedServer) -> None:
        for _ in range(2):
            response = await client.request(
                _via(server, "http", "Basic b3BzOnB3"), "POST", "/hook?a=1", HOST, b"{}",
                timeout=2, body_limit=10,
            )  # fmt: skip
            assert response.body == b"ok"

    server = serve([OK, OK], body)

    assert server.connections == 1
    first = server.raw(0)
    assert first.startswith(b"POST http://10.9.8.7:8080/hook?a=1 HTTP/1.1\r\n")
    assert b"\r\nHost: sink.test\r\n" in first
    assert b"\r\nProxy-Authorization: Basic b3BzOnB3\r\n" in first


def test_a_refused_tunnel_is_connect_failed_and_nothing_follows_it() -> None:
    refused = b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n"

    async def body(client: HttpClient, server: ScriptedServer) -> None:
        with pytest.raises(ConnectFailed, match=r"^proxy refused the tunnel: 407 Proxy Auth"):
            await client.request(
                _via(server, "https"), "POST", "/hook", HOST, b"{}", timeout=2, body_limit=10
            )

    server = serve([refused], body)

    assert [raw.split(b"\r\n", 1)[0] for _, raw in server.requests] == [
        b"CONNECT 10.9.8.7:8443 HTTP/1.1"
    ]
    assert b"\r\nHost: 10.9.8.7:8443\r\n" in server.raw(0)


def test_a_proxy_closing_before_it_answers_the_connect_is_connect_failed() -> None:
    async def body(client: HttpClient, server: ScriptedServer) -> None:
        with pytest.raises(ConnectFailed, match=r"^proxy: connection closed before a response"):
            await client.request(
                _via(server, "https"), "GET", "/", HOST, None, timeout=2, body_limit=10
            )

    server = serve([Reply(b"", after="close")], body)

    assert len(server.requests) == 1


def test_an_unreachable_proxy_is_connect_failed() -> None:
    async def body() -> None:
        client = HttpClient()
        origin = Origin("http", "10.9.8.7", 80, "hooks.test", Proxy("127.0.0.1", free_port()))
        try:
            with pytest.raises(ConnectFailed, match=r"^proxy: connection refused"):
                await client.request(origin, "GET", "/", HOST, None, timeout=2, body_limit=10)
        finally:
            await client.close()

    run(body)
