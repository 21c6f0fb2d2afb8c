"""``/topics``: fan-out topics, a name and the endpoints ``POST /jobs {"topic"}`` creates a
job on.

``endpoints`` is an array of 1 to 100 distinct endpoint names (400 naming the field
otherwise), each a live endpoint (404 ENDPOINT_NOT_FOUND, as for a job's endpoint). Topics
are named as endpoints are. ``PUT /topics/{name}`` replaces the list; jobs created from the
old one are not touched. ``DELETE`` deletes the topic for real; an endpoint a topic names
cannot be deleted (409 CONFLICT naming the topics). Scopes as for every route: GET needs
``read``, the others ``write``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chalicelib.api import crud
from chalicelib.api.http import Resource
from chalicelib.domain.topics import check_topic_name, parse_topic_endpoints
from chalicelib.services.topics import TopicService

resource = Resource(__name__)


def _endpoints(body: Mapping[str, Any]) -> list[str]:
    return parse_topic_endpoints(body.get("endpoints"))


def _service() -> TopicService:
    return resource.services.topic_service()


crud.value_routes(
    resource, "/topics", "endpoints", _service, _endpoints, check_name=check_topic_name
)
