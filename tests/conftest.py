"""Shared fixtures. Real services only: tests/support/ starts each one (served.py, pg.py)
and holds every helper a test imports (no test imports a conftest); tests/fixtures/ holds
data files."""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.api_client import ApiClient
from tests.support.environment import BOOTSTRAP_KEY, ENCRYPTION_KEY, PROFILE
from tests.support.roots import Roots

pytest_plugins = ["tests.support.pg", "tests.support.served", "tests.support.netguard"]


def pytest_report_header() -> str:
    shown = ", ".join(f"{k}={v}" for k, v in PROFILE.items()) or "defaults (PostgreSQL)"
    return f"database configuration: {shown}"


def pytest_configure(config: pytest.Config) -> None:
    """SIGTERM and SIGHUP end the session as Ctrl-C does; connects stay on loopback.

    By default they kill the process on the spot, and every server a fixture started
    (PostgreSQL, Redis, Tansu, a local stack) would be left running; as KeyboardInterrupt,
    pytest stops and tears every fixture down (tests/acceptance/test_no_server_outlives.py).
    """

    def interrupt(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")

    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, interrupt)
    # No test reaches outside loopback: tests/support/netguard.py.
    from tests.support import netguard

    netguard.install()


@pytest.fixture
def app_env(
    db_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> Iterator[dict[str, str]]:
    """Process environment for one test: its own database, known keys, nothing inherited.

    Only the test harness's own knobs (TE_TEST_*, TE_CHAOS_*) and the run's database
    configuration (:data:`PROFILE`) survive.
    """
    for name in list(os.environ):
        if name.startswith("TE_") and not name.startswith(("TE_TEST_", "TE_CHAOS_")):
            monkeypatch.delenv(name)
    env = {
        "TE_DATABASE_URL": db_url,
        "TE_BOOTSTRAP_API_KEY": BOOTSTRAP_KEY,
        "TE_SECRET_ENCRYPTION_KEY": ENCRYPTION_KEY,
        "TE_ALLOW_PRIVATE_TARGETS": "true",
        "TE_DATA_DIR": str(tmp_path / "data"),
        **PROFILE,
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    yield env


@pytest.fixture
def roots(app_env: dict[str, str]) -> Iterator[Roots]:
    """This test's processes (:class:`Roots`), over :func:`app_env`'s environment."""
    built = Roots()
    yield built
    built.close()


@pytest.fixture
def lambda_root(app_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A new Lambda container for the scheduled functions (``chalicelib.wiring.lambdas``)."""
    from chalicelib.wiring import lambdas

    root = lambdas.LambdaRoot()
    monkeypatch.setattr(lambdas, "root", root)
    yield root
    root.close()


@pytest.fixture
def chalice_app(roots: Roots) -> Any:
    """``app.py``'s app (one per process: Chalice registers a blueprint once), serving from
    this test's current process root."""
    import app as app_module
    from chalicelib.wiring.api import ApiRoot

    app_module.app.use(ApiRoot(roots.current))
    return app_module.app


@pytest.fixture
def api(chalice_app: Any, roots: Roots) -> Iterator[ApiClient]:
    from chalice.test import Client

    with Client(chalice_app) as client:
        yield ApiClient(client, app=chalice_app, roots=roots)


#: The process environment as the session started with it (an ``os._Environ``).
_PROCESS_ENVIRON = os.environ


@pytest.fixture(autouse=True)
def _live_secrets_forgotten() -> Iterator[None]:
    """The secrets a test decrypted are redacted from every later log line of the process
    (chalicelib.domain.redaction.LIVE_SECRETS): forget them after each test, so one test's
    secret never rewrites another's log assertions."""
    yield
    from chalicelib.domain.redaction import LIVE_SECRETS

    LIVE_SECRETS.clear()


@pytest.fixture(autouse=True)
def _log_handlers_restored() -> Iterator[None]:
    """A process a test starts in-process installs its stderr handler on the root logger
    (chalicelib.logs.configure_logging), bound to the stderr of that moment: the test's
    capture, closed when the test ends. Remove what the test added, so no later test's
    threads write into a closed capture."""
    root = logging.getLogger()
    before = list(root.handlers)
    yield
    for handler in list(root.handlers):
        if handler not in before:
            root.removeHandler(handler)


@pytest.fixture(autouse=True)
def _process_environ_restored() -> Iterator[None]:
    """chalice.test.Client swaps ``os.environ`` for a copy while it handles a request and
    swaps it back after; used from several threads at once, the swaps interleave and a copy
    can stay in place for the rest of the session, so that ``monkeypatch.setenv`` no longer
    reaches the real environment (OpenSSL, subprocesses). Put the real one back after each
    test."""
    yield
    if os.environ is not _PROCESS_ENVIRON:
        os.environ = _PROCESS_ENVIRON  # type: ignore[assignment]  # noqa: B003 (restoring, not clearing)
