"""``/configs``: named key-value objects endpoints reference as ``{{config.*}}``.

``values`` is a JSON object (any JSON values). Updates take effect for future executions;
an execution keeps the snapshot its first attempt resolved. A config that a live endpoint
or the endpoint snapshot of a live job references cannot be deleted (409 CONFLICT naming
them). DELETE is a soft delete (the row stays for history, marked); creating the name
again revives it with the new values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chalicelib.api import crud
from chalicelib.api.http import Resource, expect_type

resource = Resource(__name__)


def _values(body: Mapping[str, Any]) -> Any:
    return expect_type(body, "values", dict)


crud.value_routes(
    resource, "/configs", "values", lambda: resource.services.config_service(), _values
)
