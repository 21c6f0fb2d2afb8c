"""Query parameters: every route refuses the ones it does not declare (400 naming them), and
accepts every one the OpenAPI document declares for it (the declaration both read)."""

from __future__ import annotations

import re

import pytest

import app as app_module
from chalicelib.api.openapi import query_parameters
from chalicelib.db.connection import Database
from tests.integration.test_api_foundation import assert_envelope
from tests.support.api_client import ApiClient
from tests.support.seed import jobs as f


def every_route() -> list[tuple[str, str, str]]:
    """(METHOD, route template, concrete path) of every route the app serves."""
    return sorted(
        (method, template, re.sub(r"\{[^}]+\}", "dummy-1", template))
        for template, entries in app_module.app.routes.items()
        for method in entries
    )


def test_every_route_refuses_an_unknown_query_parameter_naming_it(api: ApiClient) -> None:
    routes = every_route()
    assert len(routes) > 40
    for method, template, path in routes:
        body = {} if method in ("POST", "PUT") else None
        reply = api.request(method, f"{path}?statuss=FAILED", body)
        assert reply.status == 400, (method, template, reply.status, reply.body)
        assert_envelope(reply, 400, "INVALID_REQUEST")
        message = reply.body["error"]["message"]
        assert message.startswith("Unknown query parameter(s): 'statuss'."), (method, template)
        assert f"{method} {template} accepts:" in message


def test_a_typo_in_the_executions_filter_is_refused_not_ignored(
    api: ApiClient, database: Database
) -> None:
    f.welcome_endpoint(database)
    reply = api.get("/executions?statuss=FAILED")
    assert_envelope(reply, 400, "INVALID_REQUEST")
    assert reply.body["error"]["message"] == (
        "Unknown query parameter(s): 'statuss'. GET /executions accepts: cursor, endpoint, "
        "error_type, limit, since, status, until."
    )
    assert api.get("/executions?status=FAILED").status == 200


def test_every_unknown_parameter_is_named_and_known_ones_beside_them_are_not(
    api: ApiClient,
) -> None:
    reply = api.get("/jobs?limit=5&zeta=1&alpha=2")
    assert_envelope(reply, 400, "INVALID_REQUEST")
    assert reply.body["error"]["message"].startswith("Unknown query parameter(s): 'alpha', 'zeta'.")


def test_a_public_route_refuses_them_too_and_a_route_without_any_says_so(
    api: ApiClient,
) -> None:
    reply = api.get("/openapi.json?format=yaml", auth=False)
    assert_envelope(reply, 400, "INVALID_REQUEST")
    assert reply.body["error"]["message"] == (
        "Unknown query parameter(s): 'format'. GET /openapi.json accepts: none."
    )


def test_every_declared_query_parameter_is_accepted(api: ApiClient) -> None:
    """Each route's declared parameters pass the guard (a value may still be refused by
    the view, never as unknown): the routes and the document cannot drift apart."""
    declared = query_parameters()
    routes = every_route()
    assert {(method, template) for method, template, _ in routes} <= set(declared)
    assert any(declared[(m, t)] for m, t, _ in routes)
    for method, template, path in routes:
        names = sorted(declared[(method, template)])
        if not names:
            continue
        body = {} if method in ("POST", "PUT") else None
        query = "&".join(f"{name}=x" for name in names)
        reply = api.request(method, f"{path}?{query}", body)
        if reply.status == 400:
            assert "Unknown query parameter" not in reply.body["error"]["message"], (
                method,
                template,
            )


@pytest.mark.parametrize("query", ["limit=5", "limit=5&cursor=", "status=ACTIVE&trigger=CRON"])
def test_declared_parameters_still_work(api: ApiClient, query: str) -> None:
    assert api.get(f"/jobs?{query}").status == 200
