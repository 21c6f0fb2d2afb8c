"""Standard Webhooks signatures (chalicelib.domain.signing), checked by the independent
``standardwebhooks`` verifier: what it accepts, what it rejects after tampering."""

from __future__ import annotations

import base64
import json
import time
from datetime import UTC, datetime, timedelta

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from chalicelib.domain import signing
from chalicelib.domain.delivery import DeliveryRequest
from chalicelib.domain.endpoints import parse_endpoint
from chalicelib.domain.redaction import redactor
from chalicelib.errors import ValidationFailed

KEY = bytes(range(32))
SECRET = "whsec_" + base64.b64encode(KEY).decode()
OLD_KEY = bytes(range(100, 132))
OLD_SECRET = "whsec_" + base64.b64encode(OLD_KEY).decode()
NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
DAY = timedelta(hours=24)


def _headers(keys: signing.SigningKeys, body: bytes, msg_id: str = "exec_1") -> dict[str, str]:
    return keys.headers(msg_id, int(time.time()), body)


def test_a_signature_verifies_with_the_third_party_verifier() -> None:
    keys = signing.signing_keys(SECRET, None, None, now=NOW, window=DAY)
    body = b'{"user_id":"u_1","note":"\\u00e9t\\u00e9"}'
    headers = _headers(keys, body)

    assert Webhook(SECRET).verify(body, headers) == json.loads(body)
    assert headers["webhook-id"] == "exec_1"
    assert headers["webhook-signature"].startswith("v1,")
    assert headers["webhook-timestamp"].isdigit()


@pytest.mark.parametrize(
    "tamper",
    [
        lambda body, h: (body.replace(b"u_1", b"u_2"), h),
        lambda body, h: (body, {**h, "webhook-id": "exec_2"}),
        lambda body, h: (body, {**h, "webhook-timestamp": str(int(h["webhook-timestamp"]) + 1)}),
    ],
    ids=["body", "id", "timestamp"],
)
def test_tampering_is_rejected_by_the_third_party_verifier(tamper) -> None:
    keys = signing.signing_keys(SECRET, None, None, now=NOW, window=DAY)
    body = b'{"user_id":"u_1"}'
    tampered_body, tampered_headers = tamper(body, _headers(keys, body))

    with pytest.raises(WebhookVerificationError):
        Webhook(SECRET).verify(tampered_body, tampered_headers)


def test_another_key_is_rejected() -> None:
    keys = signing.signing_keys(SECRET, None, None, now=NOW, window=DAY)
    body = b"{}"
    with pytest.raises(WebhookVerificationError):
        Webhook(OLD_SECRET).verify(body, _headers(keys, body))


def test_during_the_rotation_window_both_keys_sign() -> None:
    keys = signing.signing_keys(SECRET, OLD_SECRET, NOW - timedelta(hours=1), now=NOW, window=DAY)
    body = b'{"a":1}'
    headers = _headers(keys, body)

    assert len(headers["webhook-signature"].split(" ")) == 2
    assert Webhook(SECRET).verify(body, headers) == {"a": 1}
    assert Webhook(OLD_SECRET).verify(body, headers) == {"a": 1}


@pytest.mark.parametrize(
    ("previous", "rotated_ago"),
    [
        (OLD_SECRET, DAY),  # the window is over
        (OLD_SECRET, None),  # never rotated
        ("not-a-key", timedelta(0)),  # a previous value that cannot sign adds nothing
        (SECRET, timedelta(0)),  # rotated to the same value: one signature
    ],
)
def test_outside_the_window_only_the_current_key_signs(previous, rotated_ago) -> None:
    rotated_at = None if rotated_ago is None else NOW - rotated_ago
    keys = signing.signing_keys(SECRET, previous, rotated_at, now=NOW, window=DAY)
    assert keys.keys == (KEY,)


@pytest.mark.parametrize(
    "value",
    [
        "sk-live-123",
        "whsec_",
        "whsec_!!!!not base64",
        "whsec_" + base64.urlsafe_b64encode(b"\xff" * 30).decode(),
        "whsec_" + base64.b64encode(b"k" * 16).decode(),
        "whsec_" + base64.b64encode(b"k" * 65).decode(),
    ],
)
def test_a_malformed_value_is_refused_without_describing_it(value: str) -> None:
    """One message whatever is wrong: neither the value nor its prefix, encoding or length."""
    with pytest.raises(signing.MalformedSigningSecret) as caught:
        signing.parse_secret(value)
    assert str(caught.value) == (
        "its value is not a Standard Webhooks key (whsec_ + base64 of 24-64 bytes)"
    )


def test_unpadded_base64_is_accepted_as_the_verifier_does() -> None:
    unpadded = "whsec_" + base64.b64encode(bytes(range(25))).decode().rstrip("=")
    assert signing.parse_secret(unpadded) == bytes(range(25))


def test_keys_never_show_in_repr_and_every_spelling_is_redacted() -> None:
    keys = signing.signing_keys(SECRET, OLD_SECRET, NOW, now=NOW, window=DAY)
    request = DeliveryRequest(execution_id="e", attempt=1, spec={}, signing=keys)
    for text in (repr(keys), repr(request)):
        assert KEY.hex() not in text and base64.b64encode(KEY).decode() not in text
    echoed = " | ".join(
        [
            SECRET,
            base64.b64encode(KEY).decode().rstrip("="),
            base64.urlsafe_b64encode(OLD_KEY).decode(),
            KEY.hex(),
            OLD_KEY.hex().upper(),
            json.dumps({"k": SECRET}),
            base64.b64encode(SECRET.encode()).decode(),
        ]
    )
    scrubbed = redactor(keys.redaction_forms()).redact(echoed)
    for leaked in (KEY.hex(), OLD_KEY.hex(), base64.b64encode(KEY).decode()[:20], "whsec_"):
        assert leaked.lower() not in scrubbed.lower()
    assert scrubbed.count("[REDACTED]") >= 7


def test_a_signature_does_not_contain_the_key_in_any_spelling() -> None:
    keys = signing.signing_keys(SECRET, None, None, now=NOW, window=DAY)
    signature = _headers(keys, b"x")["webhook-signature"]
    assert redactor(keys.redaction_forms()).redact(signature) == signature


def test_unsigned_requests_get_no_headers() -> None:
    assert signing.webhook_headers(None, "e", b"body") == {}


def test_webhook_headers_use_the_send_time_in_integer_seconds() -> None:
    keys = signing.signing_keys(SECRET, None, None, now=NOW, window=DAY)
    headers = signing.webhook_headers(keys, "e", b"b", now=lambda: 1_700_000_000.9)
    assert headers["webhook-timestamp"] == "1700000000"
    assert headers["webhook-signature"] == signing.sign(KEY, "e", 1_700_000_000, b"b")


def test_the_stream_payload_leaves_out_the_workers_own_fields() -> None:
    fields = {"b": "2", "a": "é", "execution_id": "e", "attempt": "1", "webhook-id": "e"}
    assert signing.stream_payload(fields) == b'{"a":"\\u00e9","b":"2"}'


def _endpoint(spec_extra: dict) -> dict:
    spec = {"url": "https://example.com/h", "method": "POST", **spec_extra}
    return {"name": "signed", "type": "HTTP", "spec": spec}


def test_endpoints_accept_a_signing_secret_name_on_every_type() -> None:
    definition = parse_endpoint(_endpoint({"signing_secret": "hooks_key"}))
    assert definition.spec["signing_secret"] == "hooks_key"
    kafka = {"bootstrap_servers": "b:9092", "topic": "t", "value_template": {}}
    redis = {"redis_url": "redis://r", "stream": "s", "fields_template": {"a": "1"}}
    for endpoint_type, spec in (("KAFKA", kafka), ("REDIS_STREAM", redis)):
        body = {"name": "x", "type": endpoint_type, "spec": {**spec, "signing_secret": "k"}}
        assert parse_endpoint(body).spec["signing_secret"] == "k"


@pytest.mark.parametrize("value", [3, "", "Has Capitals", "{{secret.k}}", "k" * 101, ["k"]])
def test_a_signing_secret_that_is_not_a_name_is_400(value) -> None:
    with pytest.raises(ValidationFailed, match=r"spec\.signing_secret"):
        parse_endpoint(_endpoint({"signing_secret": value}))


def test_the_rotation_window_setting() -> None:
    from chalicelib.errors import ConfigurationError
    from chalicelib.settings import load_settings

    assert load_settings({}).signing_rotation_window_sec == 86400
    assert load_settings({"TE_SIGNING_ROTATION_WINDOW_SEC": "0"}).signing_rotation_window_sec == 0
    with pytest.raises(ConfigurationError, match="TE_SIGNING_ROTATION_WINDOW_SEC"):
        load_settings({"TE_SIGNING_ROTATION_WINDOW_SEC": "-1"})
