"""``/configs``: named key-value objects endpoints reference as ``{{config.*}}``.

``values`` is a JSON object (any JSON values). Updates take effect for future executions;
an execution keeps the snapshot its first attempt resolved. A config that a live endpoint
or the endpoint snapshot of a live job references cannot be deleted (409 CONFLICT naming
them). DELETE is a soft delete (the row stays for history, marked); creating the name
again revives it with the new values. Replacing a config whose values live endpoints (or
live jobs' snapshots) send with ``{{secret.*}}`` needs an ``admin`` key (403
INSUFFICIENT_SCOPE otherwise, nothing written): its values can choose where the secrets go.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from chalicelib.api import crud
from chalicelib.api.auth import authorize_secret_config, principal_of
from chalicelib.api.http import Resource, expect_type
from chalicelib.services.configs import ConfigService

resource = Resource(__name__)


def _values(body: Mapping[str, Any]) -> Any:
    return expect_type(body, "values", dict)


def _service() -> ConfigService:
    """The config service, checking the caller's scope before values that go out with
    secrets are replaced."""
    principal = principal_of(resource.request.context)
    return dataclasses.replace(
        resource.services.config_service(),
        authorize_secrets=lambda name, secrets: authorize_secret_config(principal, secrets, name),
    )


crud.value_routes(resource, "/configs", "values", _service, _values)
