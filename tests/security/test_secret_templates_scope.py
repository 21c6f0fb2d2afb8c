"""Who may write templates that reference secrets: ``admin`` keys only.

A template chooses where a secret's value goes: a ``write`` key that could put
``{{secret.NAME}}`` in the URL or a header of an endpoint pointing at its own server would
read every secret there. So POST and PUT ``/endpoints`` with such a template answer 403
INSUFFICIENT_SCOPE naming the ``admin`` scope to a ``write`` key, and nothing is written;
an ``admin`` key still may, and a ``write`` key still writes endpoints without secrets.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.test_api_foundation import assert_envelope
from tests.integration.test_api_keys import make_key
from tests.support.api_client import ApiClient
from tests.support.environment import BOOTSTRAP_KEY
from tests.support.factories import endpoint_body, immediate_job

TARGET = "https://hooks.example.com/in"


@pytest.fixture
def writer(api: ApiClient) -> ApiClient:
    """``api`` holding a fresh ``write`` key (a secret ``tok`` exists)."""
    assert api.post("/secrets", {"name": "tok", "value": "s3cr3t-value-xyz"}).status == 201
    api.key = make_key(api, "deployer", "write")
    return api


def _refused(reply: Any) -> None:
    assert_envelope(reply, 403, "INSUFFICIENT_SCOPE")
    message = reply.body["error"]["message"]
    assert "'admin'" in message and "{{secret.tok}}" in message, message


@pytest.mark.parametrize(
    "spec",
    [
        {"url": TARGET, "method": "POST", "headers": {"Authorization": "Bearer {{secret.tok}}"}},
        {"url": TARGET + "?leak={{secret.tok}}", "method": "POST"},
        {"url": TARGET, "method": "POST", "body_template": {"k": "{{secret.tok}}"}},
    ],
    ids=["header", "url", "body"],
)
def test_a_write_key_cannot_create_an_endpoint_whose_templates_reference_a_secret(
    writer: ApiClient, spec: dict[str, Any]
) -> None:
    _refused(writer.post("/endpoints", endpoint_body("leak", spec=spec)))
    assert writer.get("/endpoints/leak").status == 404


def test_a_write_key_cannot_add_a_secret_to_an_endpoint_by_put(writer: ApiClient) -> None:
    assert writer.post("/endpoints", endpoint_body("plain", TARGET)).status == 201
    spec = {"url": TARGET, "method": "POST", "headers": {"X-K": "{{secret.tok}}"}}
    _refused(writer.put("/endpoints/plain", {"type": "HTTP", "spec": spec}))
    assert "headers" not in writer.get("/endpoints/plain").body["spec"]


def test_a_write_key_cannot_redirect_an_admin_endpoint_that_sends_a_secret(
    writer: ApiClient,
) -> None:
    spec = {"url": TARGET, "method": "POST", "headers": {"X-K": "{{secret.tok}}"}}
    write_key, writer.key = writer.key, BOOTSTRAP_KEY
    assert writer.post("/endpoints", endpoint_body("admin-made", spec=spec)).status == 201
    writer.key = write_key
    moved = {**spec, "url": "http://attacker.example.net/"}
    _refused(writer.put("/endpoints/admin-made", {"type": "HTTP", "spec": moved}))
    assert writer.get("/endpoints/admin-made").body["spec"]["url"] == TARGET


def test_an_admin_key_may_write_secret_templates(api: ApiClient) -> None:
    assert api.post("/secrets", {"name": "tok", "value": "s3cr3t-value-xyz"}).status == 201
    spec = {"url": TARGET, "method": "POST", "headers": {"X-K": "{{secret.tok}}"}}
    assert api.post("/endpoints", endpoint_body("sends", spec=spec)).status == 201
    assert api.put("/endpoints/sends", {"type": "HTTP", "spec": spec}).status == 200


ROUTED = "https://{{config.host}}/in"
SENDS_TOKEN = {"url": ROUTED, "method": "POST", "headers": {"X-K": "{{secret.tok}}"}}


def _admin_endpoint(writer: ApiClient, spec: dict[str, Any]) -> str:
    """An admin key registers config ``route`` and endpoint ``routed`` (``spec``, resolved
    with that config); returns the write key, which ``writer`` holds again."""
    write_key, writer.key = writer.key, BOOTSTRAP_KEY
    assert (
        writer.post("/configs", {"name": "route", "values": {"host": "hooks.example.com"}}).status
        == 201
    )
    body = endpoint_body("routed", spec=spec, config="route")
    assert writer.post("/endpoints", body).status == 201, body
    writer.key = write_key
    return write_key


def test_a_write_key_cannot_redirect_a_secret_through_the_config_its_url_reads(
    writer: ApiClient,
) -> None:
    _admin_endpoint(writer, SENDS_TOKEN)
    _refused(writer.put("/configs/route", {"values": {"host": "attacker.example.net"}}))
    assert writer.get("/configs/route").body["values"] == {"host": "hooks.example.com"}


def test_a_live_jobs_snapshot_keeps_its_config_guarded(writer: ApiClient) -> None:
    write_key = _admin_endpoint(writer, SENDS_TOKEN)
    assert writer.post("/jobs", immediate_job("routed", "k-1")).status == 201
    writer.key = BOOTSTRAP_KEY  # the endpoint stops sending the secret; the job's snapshot not
    assert (
        writer.put(
            "/endpoints/routed",
            {"type": "HTTP", "spec": {"url": ROUTED, "method": "POST"}, "config": "route"},
        ).status
        == 200
    )
    writer.key = write_key
    _refused(writer.put("/configs/route", {"values": {"host": "attacker.example.net"}}))


def test_configs_that_send_no_secret_stay_writable_and_admin_may_write_any(
    writer: ApiClient,
) -> None:
    write_key = _admin_endpoint(writer, {"url": ROUTED, "method": "POST"})
    assert writer.put("/configs/route", {"values": {"host": "other.example.com"}}).status == 200
    writer.key = BOOTSTRAP_KEY
    spec = {**SENDS_TOKEN, "url": ROUTED + "?v=1"}
    assert (
        writer.put("/endpoints/routed", {"type": "HTTP", "spec": spec, "config": "route"}).status
        == 200
    )
    assert writer.put("/configs/route", {"values": {"host": "hooks.example.com"}}).status == 200
    writer.key = write_key
    _refused(writer.put("/configs/route", {"values": {"host": "attacker.example.net"}}))
