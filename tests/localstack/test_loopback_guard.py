"""The loopback guard of the host-mode LocalStack and its functions (tests/localstack/guard).

Its decision is pure and tested as such; that it decides *before* the system call is shown
in a fresh interpreter whose socket calls are recorders installed before the guard: a
refused connect, send, bind or lookup raises without reaching them, an allowed one
reaches them. (A fresh interpreter: the guard patches its process for good, and this one
has the suite's own guard, tests/support/netguard.py.) These run in the main suite; the
guard inside LocalStack and inside a function is shown by test_localstack_guard.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

GUARD_DIR = Path(__file__).resolve().parent / "guard"
sys.path.insert(0, str(GUARD_DIR))
try:
    import loopback_guard
finally:
    sys.path.remove(str(GUARD_DIR))


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1",
        "127.8.9.10",
        "::1",
        "[::1]",
        "::ffff:127.0.0.1",
        "localhost",
        "LOCALHOST.",
        "api.localhost",
        "localhost.localstack.cloud",
        "s3.localhost.localstack.cloud",
        "vm",  # a loopback name of the hosts file below
    ],
)
def test_loopback_destinations_are_allowed(host: str) -> None:
    assert loopback_guard.decide_destination(host, hosts={"vm"}) == ""


@pytest.mark.parametrize(
    ("host", "reason"),
    [
        ("192.0.2.1", "outside 127.0.0.0/8"),
        ("10.255.255.53", "outside 127.0.0.0/8"),
        ("169.254.169.254", "outside 127.0.0.0/8"),  # the instance metadata service
        ("2001:db8::1", "outside 127.0.0.0/8"),
        ("::ffff:192.0.2.1", "outside 127.0.0.0/8"),
        ("example.com", "needs DNS"),
        ("localstack.cloud", "needs DNS"),
        ("analytics.localstack.cloud", "needs DNS"),
        (b"pypi.org", "needs DNS"),
    ],
)
def test_other_destinations_are_refused_with_the_reason(host: str | bytes, reason: str) -> None:
    assert reason in loopback_guard.decide_destination(host, hosts={"vm"})


def test_a_listener_must_be_on_loopback_too() -> None:
    for wildcard in ("", "0.0.0.0", "::"):
        assert "not loopback" in loopback_guard.decide_destination(wildcard, listen=True)
    assert loopback_guard.decide_destination("127.0.0.1", listen=True) == ""


def test_the_hosts_file_gives_only_its_loopback_names() -> None:
    hosts = "127.0.0.1 localhost runsc  # comment\n::1 ip6-localhost\n192.0.2.2 router\n#x y\n"
    assert loopback_guard.loopback_names(hosts) == {"localhost", "runsc", "ip6-localhost"}


#: Runs in a fresh interpreter: recorders stand in for the real calls, then the guard goes
#: on top; each attempt reports whether it was refused and whether the recorder was reached.
PROBE = r"""
import json, socket, sys
sys.path.insert(0, sys.argv[1])
reached = []

def recorder(name, result=None):
    def call(*args, **kwargs):
        reached.append(name)
        return result
    return call

socket.socket.connect = recorder("connect")
socket.socket.connect_ex = recorder("connect_ex", 0)
socket.socket.sendto = recorder("sendto", 0)
socket.socket.bind = recorder("bind")
socket.getaddrinfo = recorder("getaddrinfo", [])
import loopback_guard
loopback_guard.install(sys.argv[2])

attempts = {
    "connect 192.0.2.1": lambda s: s.connect(("192.0.2.1", 80)),
    "connect_ex 10.0.0.1": lambda s: s.connect_ex(("10.0.0.1", 80)),
    "sendto 192.0.2.1:53": lambda s: s.sendto(b"query", ("192.0.2.1", 53)),
    "bind 0.0.0.0": lambda s: s.bind(("0.0.0.0", 0)),
    "lookup example.com": lambda s: socket.getaddrinfo("example.com", 443),
    "create_connection example.com": lambda s: socket.create_connection(("example.com", 80)),
    "connect 127.0.0.1": lambda s: s.connect(("127.0.0.1", 80)),
    "bind 127.0.0.1": lambda s: s.bind(("127.0.0.1", 0)),
    "lookup localhost": lambda s: socket.getaddrinfo("localhost", 80),
}
results = {}
for name, attempt in attempts.items():
    reached.clear()
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        attempt(sock)
        refused = ""
    except loopback_guard.NonLoopbackRefused as exc:
        refused = str(exc)
    finally:
        sock.close()
    results[name] = {"refused": refused, "reached": list(reached)}
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, dict[str, object]], Path]:
    report = tmp_path_factory.mktemp("guard") / "report.jsonl"
    done = subprocess.run(
        [sys.executable, "-I", "-c", PROBE, str(GUARD_DIR), str(report)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(done.stdout), report


def test_a_refused_attempt_raises_before_the_system_call(
    guarded: tuple[dict[str, dict[str, object]], Path],
) -> None:
    results, _ = guarded
    for name in (
        "connect 192.0.2.1",
        "connect_ex 10.0.0.1",
        "sendto 192.0.2.1:53",
        "bind 0.0.0.0",
        "lookup example.com",
        "create_connection example.com",
    ):
        assert "loopback guard refused" in str(results[name]["refused"]), (name, results[name])
        assert results[name]["reached"] == [], f"{name} reached the real call"


def test_loopback_attempts_go_through(guarded: tuple[dict[str, dict[str, object]], Path]) -> None:
    results, _ = guarded
    assert results["connect 127.0.0.1"] == {"refused": "", "reached": ["connect"]}
    assert results["bind 127.0.0.1"] == {"refused": "", "reached": ["bind"]}
    assert results["lookup localhost"] == {"refused": "", "reached": ["getaddrinfo"]}


def test_every_refusal_is_reported(guarded: tuple[dict[str, dict[str, object]], Path]) -> None:
    _, report = guarded
    lines = [json.loads(line) for line in report.read_text().splitlines()]
    assert [(line["what"], line["target"]) for line in lines] == [
        ("connect", "('192.0.2.1', 80)"),
        ("connect", "('10.0.0.1', 80)"),
        ("sendto", "('192.0.2.1', 53)"),
        ("bind", "('0.0.0.0', 0)"),
        ("lookup", "'example.com'"),
        ("lookup", "'example.com'"),
    ]
    assert all(line["pid"] and line["reason"] for line in lines)


def test_sitecustomize_installs_it_in_every_python_started_with_the_guard_on_its_path() -> None:
    env = {**os.environ, "PYTHONPATH": str(GUARD_DIR)}
    done = subprocess.run(
        [sys.executable, "-c", "import loopback_guard; print(loopback_guard.installed())"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.strip() == "True"
