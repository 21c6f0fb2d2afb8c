"""``/secrets``: sensitive values endpoints reference as ``{{secret.<name>}}``.

Values are encrypted at rest (AES-256-GCM, :mod:`chalicelib.crypto`) with
``TE_SECRET_ENCRYPTION_KEY``; responses carry only the name and timestamps, never the value,
and nothing here logs it. Creating or rotating a secret without a configured key is a
server misconfiguration: 500 INTERNAL_ERROR whose message names TE_SECRET_ENCRYPTION_KEY.
A value is a non-empty string of at most 64 KiB (UTF-8). A secret that a live endpoint's
spec or the endpoint snapshot of a live job references cannot be deleted (409 CONFLICT
naming them). Unlike the other catalogue resources, DELETE really deletes: history names a
secret only inside snapshot text, and the ciphertext must not outlive it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chalicelib.api import crud
from chalicelib.api.http import Resource, expect_type

resource = Resource(__name__)


def _value(body: Mapping[str, Any]) -> Any:
    return expect_type(body, "value", str)


crud.value_routes(
    resource, "/secrets", "value", lambda: resource.services.secret_service(), _value, shown=False
)
