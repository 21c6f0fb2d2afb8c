"""The Python SDK (te.client) against the real stack: typed errors carrying the envelope,
pagination to the end; and ``te executions retry`` against a loopback server answering as
CONTRACTS.md's POST /executions/{id}/retry (the route is built on another branch)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from te.client import ApiError, Client, ConfigError, Conflict, NotFound, Unauthorized, load_config
from tests.conftest import BOOTSTRAP_KEY
from tests.integration.cli.conftest import Te


def test_errors_are_typed_and_carry_the_envelope(stack: str) -> None:
    client = Client(stack, BOOTSTRAP_KEY)
    with pytest.raises(NotFound) as missing:
        client.jobs.get("job_missing")
    assert (missing.value.status, missing.value.code) == (404, "JOB_NOT_FOUND")
    assert missing.value.request_id and missing.value.request_id.startswith("req_")
    client.configs.create({"name": "c", "values": {}})
    with pytest.raises(Conflict) as taken:
        client.configs.create({"name": "c", "values": {}})
    assert taken.value.status == 409 and isinstance(taken.value, ApiError)
    with pytest.raises(Unauthorized):
        Client(stack, "wrong").configs.list()


def test_pages_follow_the_cursor_to_the_end(stack: str) -> None:
    client = Client(stack, BOOTSTRAP_KEY)
    for n in range(5):
        client.configs.create({"name": f"c{n}", "values": {"n": n}})
    first = client.configs.list(limit=2)
    assert len(first["items"]) == 2 and first["cursor"]
    names = [c["name"] for c in client.pages("/configs", {"limit": 2})]
    assert sorted(names) == [f"c{n}" for n in range(5)]
    client.configs.delete("c0")
    assert len(list(client.configs.list_all())) == 4
    assert client.health() == {"status": "ok", "database": "ok"}
    assert "te_queue_depth" in client.metrics()


def test_configuration_from_the_environment_or_the_file(tmp_path: Any) -> None:
    assert load_config({"TE_URL": "http://x", "TE_API_KEY": "k"}) == ("http://x", "k")
    config = tmp_path / "c.toml"
    config.write_text('url = "http://y"\napi_key = "k2"\n')
    assert load_config({"TE_CONFIG": str(config)}) == ("http://y", "k2")
    assert load_config({"TE_CONFIG": str(config), "TE_URL": "http://z"}) == ("http://z", "k2")
    with pytest.raises(ConfigError, match="TE_URL"):
        load_config({"TE_CONFIG": str(tmp_path / "none.toml")})
    config.write_text("url = ")
    with pytest.raises(ConfigError, match="cannot read"):
        load_config({"TE_CONFIG": str(config)})


class _RetryContract(BaseHTTPRequestHandler):
    """POST /executions/{id}/retry as CONTRACTS.md (issue 18, point 3) defines it."""

    def do_POST(self) -> None:
        parts = self.path.strip("/").split("/")
        if len(parts) != 3 or parts[0] != "executions" or parts[2] != "retry":
            self._send(
                404, {"error": {"code": "ROUTE_NOT_FOUND", "message": "no", "request_id": "req_1"}}
            )
        elif self.headers.get("Authorization") != f"Bearer {BOOTSTRAP_KEY}":
            self._send(
                401, {"error": {"code": "UNAUTHORIZED", "message": "key", "request_id": "req_2"}}
            )
        elif parts[1] == "exec_failed":
            self._send(200, {"execution_id": "exec_failed", "status": "QUEUED", "attempt_count": 3})
        elif parts[1] == "exec_done":
            message = "Only a FAILED execution can be retried; this one is SUCCESS."
            body = {"code": "EXECUTION_NOT_RETRYABLE", "message": message, "request_id": "req_3"}
            self._send(409, {"error": body})
        else:
            body = {
                "code": "EXECUTION_NOT_FOUND",
                "message": "No such execution.",
                "request_id": "req_4",
            }
            self._send(404, {"error": body})

    def _send(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.fixture
def contract_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _RetryContract)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_retry_follows_the_contract(contract_server: str, tmp_path: Any) -> None:
    te = Te(contract_server, tmp_path)
    assert te.json("executions", "retry", "exec_failed")["status"] == "QUEUED"
    refused = te("executions", "retry", "exec_done")
    assert refused.exit_code == 1
    assert "EXECUTION_NOT_RETRYABLE" in refused.stderr and "HTTP 409" in refused.stderr
    assert "Only a FAILED execution" in refused.stderr
    missing = te("executions", "retry", "exec_nope")
    assert missing.exit_code == 1 and "EXECUTION_NOT_FOUND" in missing.stderr
    with pytest.raises(Conflict):
        Client(contract_server, BOOTSTRAP_KEY).executions.retry("exec_done")
