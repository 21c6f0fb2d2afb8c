"""OpenAPI for ``/topics``: fan-out topics, named as endpoints are, with the lifecycle every
catalogue resource has (:func:`~chalicelib.api.openapi.catalogue.crud_fragment`)."""

from __future__ import annotations

from typing import Any

from chalicelib.api.openapi.catalogue import crud_fragment
from chalicelib.api.openapi.common import response_ref
from chalicelib.domain.topics import MAX_TOPIC_ENDPOINTS

_ENDPOINTS = {
    "type": "array",
    "minItems": 1,
    "maxItems": MAX_TOPIC_ENDPOINTS,
    "uniqueItems": True,
    "items": {"type": "string", "maxLength": 100},
    "description": "The endpoints POST /jobs with this topic creates a job on, one each, in "
    f"this order: 1 to {MAX_TOPIC_ENDPOINTS} distinct live endpoints. 400 naming the field "
    "when empty, too long or repeating a name; 404 ENDPOINT_NOT_FOUND naming one that does "
    "not exist. A replacement does not touch jobs created from the old list.",
}

TOPICS: dict[str, Any] = crud_fragment(
    "topic",
    properties={"endpoints": _ENDPOINTS},
    required=["endpoints"],
    conflict="never: jobs created from a topic do not depend on it.",
)
_PATHS = TOPICS["paths"]
_MISSING_ENDPOINT = "ENDPOINT_NOT_FOUND: an endpoint the list names does not exist."
_PATHS["/topics"]["post"]["responses"]["404"] = response_ref("NotFound", _MISSING_ENDPOINT)
_PATHS["/topics/{name}"]["put"]["responses"]["404"] = response_ref(
    "NotFound", "TOPIC_NOT_FOUND: no topic with this name; or " + _MISSING_ENDPOINT
)
# A topic's delete is never refused: nothing depends on a topic.
del _PATHS["/topics/{name}"]["delete"]["responses"]["409"]
_PATHS["/topics/{name}"]["delete"]["summary"] = "Delete a topic (its jobs are not touched)."
