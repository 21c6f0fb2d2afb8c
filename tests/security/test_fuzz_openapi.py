"""A small schemathesis run in ``make test``: 0 5xx, every error enveloped, all conformant.

The ≥1,000-request run is ``tests/chaos/test_fuzz_openapi_long.py`` (``make chaos``).
"""

from __future__ import annotations

from tests.security.fuzzing import Fuzzer, api_server, fetch_document, fuzz, load_schema


def test_generated_requests_get_no_5xx_and_conform_to_the_document(
    app_env: dict[str, str],
) -> None:
    report = fuzz(examples_per_operation=3)

    assert report.requests > 0
    assert report.server_errors == 0, report.summary()
    assert report.failures == [], report.summary()


def test_the_checks_catch_a_response_that_breaks_the_document(app_env: dict[str, str]) -> None:
    """Guard against a vacuous pass: a document the app does not match must fail the run."""
    with api_server() as base_url:
        doc = fetch_document(base_url)
        get_doc = doc["paths"]["/openapi.json"]["get"]
        doc["paths"] = {"/openapi.json": {"get": get_doc}}
        get_doc["responses"]["200"]["content"] = {"application/json": {"schema": {"type": "array"}}}
        report = Fuzzer(base_url, load_schema(doc)).run(1)

    assert report.requests >= 1
    assert any("GET /openapi.json 200" in failure for failure in report.failures), report.summary()
