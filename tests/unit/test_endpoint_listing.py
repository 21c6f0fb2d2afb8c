"""The filters of GET /endpoints: parsing, and which names a health keeps."""

from __future__ import annotations

import pytest

from chalicelib.domain.endpoint_listing import (
    EndpointFilter,
    NameSet,
    names_for,
    parse_endpoint_filter,
)
from chalicelib.domain.health import Health
from chalicelib.errors import ValidationFailed

JUDGED = {"a": Health.HEALTHY, "b": Health.FAILING, "c": Health.HEALTHY, "d": Health.IDLE}


def test_no_query_keeps_everything() -> None:
    assert parse_endpoint_filter(None) == EndpointFilter()
    assert parse_endpoint_filter({"limit": "5"}) == EndpointFilter()


def test_paused_and_health_parse() -> None:
    wanted = parse_endpoint_filter({"paused": "false", "health": "FAILING"})
    assert wanted == EndpointFilter(paused=False, health=Health.FAILING)
    assert parse_endpoint_filter({"paused": "true"}).paused is True


@pytest.mark.parametrize("query", [{"paused": "yes"}, {"paused": ""}, {"health": "healthy"}])
def test_other_values_are_refused(query: dict[str, str]) -> None:
    with pytest.raises(ValidationFailed, match=next(iter(query))):
        parse_endpoint_filter(query)


def test_a_health_keeps_the_endpoints_judged_so() -> None:
    assert names_for(Health.HEALTHY, JUDGED) == NameSet(names=("a", "c"), among=True)
    assert names_for(Health.DEGRADED, JUDGED) == NameSet(names=(), among=True)


def test_idle_keeps_every_endpoint_not_judged_busy() -> None:
    assert names_for(Health.IDLE, JUDGED) == NameSet(names=("a", "b", "c"), among=False)
    assert names_for(Health.IDLE, {}).params() == {"names": [], "among": False}
