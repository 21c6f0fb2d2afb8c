"""Endpoint snapshots from the claim are parsed once per distinct text."""

from __future__ import annotations

import json

from chalicelib.worker import models
from chalicelib.worker.models import parse_snapshot


def test_equal_texts_share_one_parsed_snapshot() -> None:
    text = json.dumps({"name": "ep", "spec": {"url": "http://x/"}})
    first = parse_snapshot(text)
    again = parse_snapshot("".join(text))  # an equal but distinct string object

    assert first == {"name": "ep", "spec": {"url": "http://x/"}}
    assert again is first


def test_different_texts_parse_separately_and_null_is_empty() -> None:
    assert parse_snapshot('{"name": "a"}') == {"name": "a"}
    assert parse_snapshot('{"name": "b"}') == {"name": "b"}
    assert parse_snapshot(None) == {}
    assert parse_snapshot("null") == {}


def test_the_cache_is_bounded() -> None:
    for i in range(models.SNAPSHOT_CACHE_SIZE + 5):
        parse_snapshot(json.dumps({"i": i}))
    assert len(models._SNAPSHOTS) <= models.SNAPSHOT_CACHE_SIZE
