"""GET /openapi.json: a valid OpenAPI 3.1 document describing exactly the app's routes."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from openapi_spec_validator import validate
from openapi_spec_validator.versions.shortcuts import get_spec_version

import app as app_module
from chalicelib.domain.endpoints import SPEC_RULES
from tests.support.api_client import ApiClient

METHODS = {"get", "put", "post", "delete", "patch", "options", "head", "trace"}


def registered_routes() -> set[tuple[str, str]]:
    """(METHOD, path) of every route the Chalice app serves (read at test time)."""
    return {
        (method.upper(), path)
        for path, entries in app_module.app.routes.items()
        for method in entries
    }


def documented_routes(document: dict[str, Any]) -> set[tuple[str, str]]:
    return {
        (method.upper(), path)
        for path, item in document["paths"].items()
        for method in item
        if method in METHODS
    }


def test_document_is_served_without_auth_and_is_valid_openapi_3_1(api: ApiClient) -> None:
    reply = api.get("/openapi.json", auth=False)
    assert reply.status == 200
    assert reply.headers["x-request-id"].startswith("req_")
    document = reply.body
    assert document["openapi"].startswith("3.1")
    version = get_spec_version(document)
    assert (version.major, version.minor) == ("3", "1")
    validate(document)


def test_every_route_is_documented_and_every_documented_route_exists(api: ApiClient) -> None:
    document = api.get("/openapi.json", auth=False).body
    registered = registered_routes()
    documented = documented_routes(document)
    assert registered, "the app registers routes"
    assert registered - documented == set(), "routes missing from the OpenAPI document"
    assert documented - registered == set(), "documented routes the app does not serve"


def test_every_operation_documents_its_errors_and_every_ref_resolves(api: ApiClient) -> None:
    document = api.get("/openapi.json", auth=False).body
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if method not in METHODS:
                continue
            codes = set(operation["responses"])
            assert any(c.startswith("2") for c in codes), (method, path)
            if operation.get("security") != []:
                assert "401" in codes, (method, path)
            if "requestBody" in operation:
                assert {"400", "413"} <= codes, (method, path)
            if "{" in path:
                assert "404" in codes, (method, path)
    text = str(document)
    for ref in set(re.findall(r"#/components/([a-zA-Z]+)/([A-Za-z0-9_]+)", text)):
        assert ref[1] in document["components"][ref[0]], ref


SNAPSHOT = Path(__file__).parent.parent / "fixtures" / "openapi_snapshot.json"


def test_served_document_equals_the_snapshot_taken_before_the_openapi_module(
    api: ApiClient,
) -> None:
    """The served document equals the snapshot taken before the OpenAPI literals moved.

    ``openapi_snapshot.json`` was generated from ``openapi_document()`` on main before the
    OpenAPI literals moved out of the route modules; a dropped path, operation, response or
    schema, or any changed value, breaks the equality.
    """
    served = api.get("/openapi.json", auth=False).body
    expected = json.loads(SNAPSHOT.read_text())
    assert sorted(served["paths"]) == sorted(expected["paths"])
    assert sorted(served["components"]["schemas"]) == sorted(expected["components"]["schemas"])
    assert served == expected


def test_each_endpoint_spec_schema_lists_every_field_the_api_accepts(api: ApiClient) -> None:
    """The spec schemas forbid other properties, so a field the validation accepts but the
    document leaves out (max_concurrent was one) makes the document refuse valid bodies."""
    schemas = api.get("/openapi.json").body["components"]["schemas"]
    by_type = {"HTTP": "HttpSpec", "KAFKA": "KafkaSpec", "REDIS_STREAM": "RedisStreamSpec"}
    assert set(by_type) == set(SPEC_RULES)
    for endpoint_type, rules in SPEC_RULES.items():
        schema = schemas[by_type[endpoint_type]]
        assert schema["additionalProperties"] is False
        assert set(schema["properties"]) == set(rules), endpoint_type
