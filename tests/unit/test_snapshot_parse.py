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


def test_the_retry_policy_is_read_at_the_claim_once_per_snapshot_text() -> None:
    from chalicelib.worker.models import ClaimedExecution

    text = json.dumps({"name": "p", "retry_policy": {"max_attempts": 3}})
    row = {
        "execution_id": "exec_1",
        "job_id": "job_1",
        "endpoint": "p",
        "endpoint_type": "HTTP",
        "input": {},
        "attempt_count": 1,
        "max_attempts": 5,
        "config_snapshot": None,
        "endpoint_snapshot": text,
    }
    first, second = ClaimedExecution.from_row(row), ClaimedExecution.from_row(dict(row))
    assert first.fault is None and first.policy is second.policy  # read once
    assert first.retry_policy.max_attempts == 5  # the execution row's, not the snapshot's
    bad = ClaimedExecution.from_row({**row, "endpoint_snapshot": '{"retry_policy": "often"}'})
    assert bad.fault is not None  # finalized FAILED unsent, never delivered
