"""The README's receiver, run as written, on a signed delivery from an HTTP endpoint without
a ``body_template`` (issue 25, point 4): the body is empty, which is not JSON, and
``Webhook.verify`` parses the body by default."""

from __future__ import annotations

import pytest
from standardwebhooks.webhooks import WebhookVerificationError

from chalicelib.db.connection import Database
from tests.fixtures.services import HttpTarget
from tests.integration.worker.conftest import settle
from tests.integration.worker.factories import http_spec, seed
from tests.integration.worker.test_signed_deliveries import (
    SECRET,
    readme_receiver,
    signing_secret,
    tampered,
)


def test_the_readme_receiver_verifies_a_bodiless_delivery(
    database: Database, make_worker, http_target: HttpTarget
) -> None:
    spec = http_spec(http_target.url("/get"), method="GET", signing_secret=signing_secret(database))
    del spec["body_template"]
    seeded = seed(database, spec=spec)

    settle(make_worker(), database, seeded.execution_ids)

    [request] = http_target.received("/get")
    assert request.body == b""
    on_http = readme_receiver(SECRET)["on_http"]
    assert on_http(request.body, request.headers) is None  # was a JSONDecodeError
    for body, headers in tampered(request.body, request.headers)[1:]:  # [0] edits the body
        with pytest.raises(WebhookVerificationError):
            on_http(body, headers)
    with pytest.raises(WebhookVerificationError):
        on_http(b"{}", request.headers)  # a body where none was signed
