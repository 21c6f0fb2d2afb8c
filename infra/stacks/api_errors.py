"""API Gateway gateway responses that keep the service's error envelope.

Errors that API Gateway answers itself (unknown route, throttling, body too large, an
integration failure) never reach the Chalice handler, so without these they would come back
as ``{"message": ...}``. Each template renders the same shape the app returns::

    {"error": {"code": "...", "message": "...", "request_id": "..."}}

They are written into the REST API's OpenAPI document as
``x-amazon-apigateway-gateway-responses``, so they are part of every API deployment.
"""

from __future__ import annotations

import json
from typing import Any

# response type -> (HTTP status or None to keep API Gateway's, the app's error code)
GATEWAY_RESPONSES: dict[str, tuple[int | None, str]] = {
    "DEFAULT_4XX": (None, "INVALID_REQUEST"),
    "DEFAULT_5XX": (None, "INTERNAL_ERROR"),
    # API Gateway answers an unknown path with 403 "Missing Authentication Token".
    "MISSING_AUTHENTICATION_TOKEN": (404, "ROUTE_NOT_FOUND"),
    "THROTTLED": (429, "RATE_LIMITED"),
    "REQUEST_TOO_LARGE": (413, "PAYLOAD_TOO_LARGE"),
    "UNSUPPORTED_MEDIA_TYPE": (415, "UNSUPPORTED_MEDIA_TYPE"),
}


def envelope_template(code: str) -> str:
    """The mapping template for one error code.

    ``$context.error.messageString`` is already a quoted JSON string, so it is not quoted
    again; ``$context.requestId`` is a bare value and is.
    """
    head = json.dumps({"code": code})[:-1]  # '{"code": "X"' without the closing brace
    return (
        '{"error": ' + head + ', "message": $context.error.messageString, '
        '"request_id": "$context.requestId"}}'
    )


def gateway_responses() -> dict[str, Any]:
    """The ``x-amazon-apigateway-gateway-responses`` OpenAPI extension object."""
    responses: dict[str, Any] = {}
    for response_type, (status, code) in GATEWAY_RESPONSES.items():
        response: dict[str, Any] = {
            "responseParameters": {
                "gatewayresponse.header.Content-Type": "'application/json'",
            },
            "responseTemplates": {"application/json": envelope_template(code)},
        }
        if status is not None:
            response["statusCode"] = str(status)
        responses[response_type] = response
    return responses
