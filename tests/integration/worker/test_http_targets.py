"""What users expect of an HTTP target, against real loopback servers:
TLS verification, proxies from the environment, redirects never followed."""

from __future__ import annotations

import datetime
import ipaddress
import os
import socket
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from chalicelib.db.connection import Database
from chalicelib.domain.delivery import DeliveryOutcome, DeliveryRequest
from chalicelib.worker.dispatchers.http import HttpDispatcher
from tests.integration.worker.loopback_proxy import LoopbackProxy
from tests.support.seed.worker import attempts, execution, http_spec, retry_policy, seed
from tests.support.served import HttpTarget, Reply, free_port
from tests.support.worker_runs import settle

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


@dataclass(frozen=True)
class Certificate:
    cert_file: Path
    key_file: Path


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> Certificate:
    """A self-signed certificate for 127.0.0.1 and localhost (its own CA)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "te-test-ca")])
    now = _now()
    names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    folder = tmp_path_factory.mktemp("https-target")
    (folder / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    (folder / "key.pem").write_bytes(key_pem)
    return Certificate(folder / "cert.pem", folder / "key.pem")


@pytest.fixture
def trusted_ca(certificate: Certificate, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``SSL_CERT_FILE`` naming the test CA, as a worker started with it sees it.

    OpenSSL reads the C environment. ``chalice.test.Client`` swaps ``os.environ`` for a
    plain dict while it runs and, used from several threads at once
    (tests/integration/test_api_jobs.py), can leave the dict in place, after which
    ``monkeypatch.setenv`` no longer reaches the C environment: ``os.putenv`` does.
    """
    previous = os.environ.get("SSL_CERT_FILE")
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate.cert_file))
    os.putenv("SSL_CERT_FILE", str(certificate.cert_file))
    yield
    if previous is None:
        os.unsetenv("SSL_CERT_FILE")
    else:
        os.putenv("SSL_CERT_FILE", previous)


@pytest.fixture
def https_target(certificate: Certificate) -> Iterator[HttpTarget]:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificate.cert_file, certificate.key_file)
    target = HttpTarget(tls=context)
    yield target
    target.close()


@pytest.fixture
def proxy() -> Iterator[LoopbackProxy]:
    server = LoopbackProxy()
    yield server
    server.close()


@pytest.fixture(autouse=True)
def no_proxy_from_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test sets the proxy variables it means; none leak in from the machine."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


def deliver(url: str, **kwargs: Any) -> DeliveryOutcome:
    """One attempt through a dispatcher built now (it reads the environment as the
    worker's does), on its own loop and connection."""
    dispatcher = HttpDispatcher(clock=_now, **{"allow_private": True, **kwargs})
    request = DeliveryRequest(execution_id="exec_target", attempt=1, spec=http_spec(url))
    return dispatcher.dispatch(request)


# --- TLS verification ---------------------------------------------------------------------


def test_an_untrusted_certificate_fails_the_attempt_before_anything_is_sent(
    database: Database, make_worker, https_target: HttpTarget
) -> None:
    seeded = seed(
        database, spec=http_spec(https_target.url("/hook")), policy=retry_policy(max_attempts=1)
    )

    settle(make_worker(), database, seeded.execution_ids)

    assert execution(database, seeded.execution_id)["status"] == "FAILED"
    (attempt,) = attempts(database, seeded.execution_id)
    assert attempt["error"]["type"] == "CONNECTION_ERROR"
    assert attempt["error"]["message"].startswith("TLS certificate verification failed: ")
    assert "self-signed certificate" in attempt["error"]["message"]
    assert https_target.received() == []


@pytest.mark.usefixtures("trusted_ca")
def test_a_ca_trusted_through_ssl_cert_file_is_accepted(https_target: HttpTarget) -> None:
    outcome = deliver(https_target.url("/hook", host="localhost"))

    assert outcome.ok, outcome.error
    (received,) = https_target.received("/hook")
    assert received.headers["host"] == f"localhost:{https_target.port}"


# --- proxies from the environment ---------------------------------------------------------


@pytest.mark.usefixtures("trusted_ca")
def test_https_goes_through_a_connect_tunnel_with_tls_to_the_target(
    monkeypatch: pytest.MonkeyPatch, https_target: HttpTarget, proxy: LoopbackProxy
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", proxy.url("ops:s3cret@"))

    outcome = deliver(https_target.url("/hook"))

    assert outcome.ok, outcome.error
    (asked,) = proxy.received()
    assert (asked.method, asked.target) == ("CONNECT", f"127.0.0.1:{https_target.port}")
    assert asked.headers["proxy-authorization"] == "Basic b3BzOnMzY3JldA=="  # ops:s3cret
    (received,) = https_target.received("/hook")
    assert "proxy-authorization" not in received.headers  # inside the tunnel: ours only


def test_http_goes_to_the_proxy_in_absolute_form(
    monkeypatch: pytest.MonkeyPatch, http_target: HttpTarget, proxy: LoopbackProxy
) -> None:
    monkeypatch.setenv("http_proxy", proxy.url())  # lower case is honoured too
    http_target.script("/hook", Reply(201, body="made"))

    outcome = deliver(http_target.url("/hook"))

    assert outcome.ok and outcome.output == {"status_code": 201, "body": "made"}
    (asked,) = proxy.received()
    assert (asked.method, asked.target) == ("POST", f"http://127.0.0.1:{http_target.port}/hook")
    assert asked.headers["host"] == f"127.0.0.1:{http_target.port}"
    assert asked.headers["x-task-executor-execution-id"] == "exec_target"
    assert len(http_target.received("/hook")) == 1


@pytest.mark.parametrize("no_proxy", ["127.0.0.1", "*", "127.0.0.0/8", "localhost,127.0.0.1"])
def test_no_proxy_goes_direct(
    monkeypatch: pytest.MonkeyPatch, http_target: HttpTarget, proxy: LoopbackProxy, no_proxy: str
) -> None:
    monkeypatch.setenv("HTTP_PROXY", proxy.url())
    monkeypatch.setenv("NO_PROXY", no_proxy)

    assert deliver(http_target.url("/direct")).ok

    assert proxy.received() == []
    assert len(http_target.received("/direct")) == 1


def test_the_worker_reads_the_proxy_from_its_environment(
    database: Database,
    make_worker,
    monkeypatch: pytest.MonkeyPatch,
    http_target: HttpTarget,
    proxy: LoopbackProxy,
) -> None:
    monkeypatch.setenv("HTTP_PROXY", proxy.url())
    seeded = seed(database, spec=http_spec(http_target.url("/via")))

    settle(make_worker(), database, seeded.execution_ids)

    assert execution(database, seeded.execution_id)["status"] == "SUCCESS"
    assert [r.target for r in proxy.received()] == [http_target.url("/via")]


def test_an_unreachable_proxy_is_a_connection_error(
    monkeypatch: pytest.MonkeyPatch, http_target: HttpTarget
) -> None:
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{free_port()}")

    outcome = deliver(http_target.url("/hook"))

    assert outcome.error is not None and outcome.error["type"] == "CONNECTION_ERROR"
    assert "proxy: connection refused" in outcome.error["message"]
    assert outcome.retryable
    assert http_target.received() == []


# --- the address policy through a proxy ---------------------------------------------------


def _resolver(address: str) -> Any:
    def resolve(host: str, port: int, **_: Any) -> list[tuple[Any, ...]]:
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]

    return resolve


@pytest.mark.parametrize(
    ("scheme", "expected"),
    [
        ("https", ("CONNECT", "93.184.216.34:443")),
        ("http", ("POST", "http://93.184.216.34:80/hook")),
    ],
)
def test_through_a_proxy_the_guard_names_the_checked_address(
    proxy: LoopbackProxy, scheme: str, expected: tuple[str, str]
) -> None:
    """The proxy is asked for the address the guard checked, not for the name (a second
    DNS answer at the proxy cannot swap in a private one); the proxy itself is loopback and
    allowed: the operator set it, not an API client."""
    outcome = deliver(
        f"{scheme}://hooks.example.test/hook",
        allow_private=False,
        resolver=_resolver("93.184.216.34"),
        proxies={scheme: proxy.url()},
    )

    (asked,) = proxy.received()
    assert (asked.method, asked.target) == expected
    # The test proxy reaches loopback only: it answers 502 for this public address.
    assert outcome.error is not None
    assert outcome.error.get("status_code") == 502 or "502" in outcome.error["message"]
    if scheme == "http":
        assert asked.headers["host"] == "hooks.example.test"


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_through_a_proxy_a_private_target_is_refused_before_the_proxy_is_asked(
    proxy: LoopbackProxy, scheme: str
) -> None:
    outcome = deliver(
        f"{scheme}://internal.example.test/admin",
        allow_private=False,
        resolver=_resolver("10.0.0.5"),
        proxies={scheme: proxy.url()},
    )

    assert outcome.error is not None and outcome.error["type"] == "CONNECTION_ERROR"
    assert "not an allowed delivery target" in outcome.error["message"]
    assert not outcome.retryable
    assert proxy.received() == []


# --- redirects ----------------------------------------------------------------------------


@pytest.fixture
def elsewhere() -> Iterator[HttpTarget]:
    target = HttpTarget()
    yield target
    target.close()


def test_a_redirect_to_another_server_is_the_result_and_is_not_followed(
    database: Database, make_worker, http_target: HttpTarget, elsewhere: HttpTarget
) -> None:
    http_target.script("/moved", Reply(302, headers={"Location": elsewhere.url("/landing")}))
    seeded = seed(
        database, spec=http_spec(http_target.url("/moved")), policy=retry_policy(max_attempts=1)
    )

    settle(make_worker(), database, seeded.execution_ids)

    (attempt,) = attempts(database, seeded.execution_id)
    assert attempt["error"]["type"] == "HTTP_ERROR"
    assert attempt["error"]["status_code"] == 302
    assert len(http_target.received("/moved")) == 1
    assert elsewhere.received() == []


@pytest.mark.parametrize("status", [301, 303, 307, 308])
def test_an_expected_redirect_status_succeeds_without_fetching_the_location(
    http_target: HttpTarget, elsewhere: HttpTarget, status: int
) -> None:
    http_target.script("/moved", Reply(status, headers={"Location": elsewhere.url("/landing")}))
    dispatcher = HttpDispatcher(allow_private=True, clock=_now)
    spec = http_spec(http_target.url("/moved"), expected_status_codes=[status])

    outcome = dispatcher.dispatch(DeliveryRequest(execution_id="exec_r", attempt=1, spec=spec))

    assert outcome.ok and outcome.output is not None
    assert outcome.output["status_code"] == status
    assert elsewhere.received() == []
