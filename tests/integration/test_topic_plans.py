"""Topic reads stay bounded by their page as topics grow: the list walks
idx_topics_created, and an endpoint's delete finds the topics naming it on
idx_topic_endpoints_endpoint, reading at most the ten (and one) it names, in both plan
modes."""

from __future__ import annotations

import pytest

from chalicelib.db.connection import Database
from chalicelib.db.queries import queries
from chalicelib.db.shapes import shaped
from tests.support.plans import bounded

TOPICS = 20_000


@pytest.fixture
def many_topics(database: Database) -> Database:
    database.run(
        "INSERT INTO endpoints (name, endpoint_type, spec) "
        "SELECT 'e' || n, 'HTTP', '{}' FROM generate_series(0, 9) AS n"
    )
    database.run(
        "INSERT INTO topics (name, endpoints, created_at) "
        "SELECT 't' || n, '[]', now() - n * interval '1 second' "
        "FROM generate_series(1, :count) AS n",
        count=TOPICS,
    )
    database.run(
        "INSERT INTO topic_endpoints (topic, endpoint) "
        "SELECT 't' || n, 'e' || (n % 10) FROM generate_series(1, :count) AS n",
        count=TOPICS,
    )
    database.run("ANALYZE topics")
    database.run("ANALYZE topic_endpoints")
    return database


@pytest.mark.parametrize("deep", [False, True])
def test_a_page_of_topics_reads_a_page(many_topics: Database, deep: bool) -> None:
    after = many_topics.run("SELECT created_at FROM topics WHERE name = 't10000'")[0]
    params = {
        "after_ts": after["created_at"] if deep else None,
        "after_id": "t10000" if deep else None,
        "limit_plus_one": 51,
    }
    query, cut = shaped(queries["catalogue_topic_list"], params)
    for plan in bounded(many_topics, query, cut, at_most=60, tables=("topics",)):
        assert "idx_topics_created" in plan.indexes(), plan
        assert plan.read()["topics"] == 51, plan


def test_the_topics_naming_an_endpoint_are_read_on_its_index(many_topics: Database) -> None:
    params = {"name": "e3", "limit": 11}
    query = queries["topics_naming_endpoint"]
    for plan in bounded(many_topics, query, params, at_most=11, tables=("topic_endpoints",)):
        assert "idx_topic_endpoints_endpoint" in plan.indexes(), plan
