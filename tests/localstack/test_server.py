"""How the host-mode LocalStack is started (tests/localstack/server.py), without starting it:
its whole environment keeps it on loopback and off the network, and where it cannot run
the tests say why."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.localstack import pythons, server


def test_localstack_gets_dummy_credentials_and_nothing_that_reaches_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIA-REAL-LOOKING")
    monkeypatch.setenv("AWS_PROFILE", "production")
    env = server.localstack_env(4599, tmp_path, tmp_path / "report.jsonl")
    assert env["AWS_ACCESS_KEY_ID"] == "test"
    assert "AWS_PROFILE" not in env
    assert env["GATEWAY_LISTEN"] == "127.0.0.1:4599"
    assert env["GATEWAY_SERVER"] == "hypercorn"
    assert {key: env[key] for key in server.OFFLINE} == {
        "AWS_EC2_METADATA_DISABLED": "true",
        "DISABLE_EVENTS": "1",
        "SKIP_SSL_CERT_DOWNLOAD": "1",
        "DNS_ADDRESS": "0",
    }
    assert env["PYTHONPATH"].split(":")[0] == str(server.GUARD_DIR)
    assert env["TE_LOOPBACK_GUARD_REPORT"] == str(tmp_path / "report.jsonl")
    assert env["LAMBDA_RUNTIME_EXECUTOR"] == "host"


def test_without_a_python_for_localstack_the_tests_say_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(server, "VENV", tmp_path / ".venv-localstack")
    monkeypatch.setattr(pythons, "newest", lambda minimum=pythons.MINIMUM: None)
    python, why = server.localstack_python()
    assert python is None
    assert why.startswith("LocalStack host mode skipped: no Python >= 3.12 on this machine")


def test_with_a_python_but_no_venv_the_tests_say_how_to_make_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(server, "VENV", tmp_path / ".venv-localstack")
    found = pythons.Interpreter((3, 13, 0), "/usr/bin/python3.13")
    monkeypatch.setattr(pythons, "newest", lambda minimum=pythons.MINIMUM: found)
    assert server.localstack_python() == (
        None,
        "LocalStack host mode skipped: no .venv-localstack (run `make localstack`)",
    )
