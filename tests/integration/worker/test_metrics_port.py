"""The worker's own counters on TE_WORKER_METRICS_PORT: scraped over
loopback HTTP from a real worker that delivered, read with prometheus_client's parser."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from chalicelib.db.connection import Database
from chalicelib.errors import ConfigurationError
from chalicelib.settings import load_settings
from chalicelib.worker import Worker
from chalicelib.worker.background import metrics_server
from tests.support.seed.worker import http_spec, retry_policy, seed
from tests.support.served import HttpTarget, Reply, free_port
from tests.support.waiting import wait_for
from tests.support.worker_runs import settings, settle


def _get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 - loopback
            return response.status, response.headers["Content-Type"], response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read().decode()


def test_the_port_shows_what_this_worker_did(
    database: Database, make_worker: Callable[..., Worker], http_target: HttpTarget
) -> None:
    http_target.script("/ok", Reply(200, body="{}"))
    http_target.script("/bad", Reply(500, body="{}"))
    ok = seed(database, spec=http_spec(http_target.url("/ok")), count=2).execution_ids
    bad = seed(database, spec=http_spec(http_target.url("/bad")), policy=retry_policy(1))
    worker = make_worker()
    settle(worker, database, ok + bad.execution_ids)
    server = metrics_server(worker, settings(worker_metrics_port=0))
    assert server is not None
    try:
        status, content_type, text = _get(f"http://127.0.0.1:{server.port}/metrics")
        missing, _, _ = _get(f"http://127.0.0.1:{server.port}/other")
    finally:
        server.stop()
    assert (status, content_type, missing) == (200, "text/plain; version=0.0.4; charset=utf-8", 404)
    samples = _samples(text)
    assert samples[("te_worker_claimed_total", ())] == 3
    assert samples[("te_worker_finalized_total", (("outcome", "succeeded"),))] == 2
    assert samples[("te_worker_finalized_total", (("outcome", "failed"),))] == 1
    assert samples[("te_worker_in_flight", ())] == 0
    assert samples[("te_worker_awaiting_record", ())] == 0
    assert samples[("te_worker_info", (("worker_id", worker.worker_id),))] == 1


def test_an_attempt_waiting_for_its_record_shows_on_the_port(
    database: Database, make_worker: Callable[..., Worker], http_target: HttpTarget
) -> None:
    http_target.script("/slow", Reply(200, body="{}", delay=0.5))
    [execution_id] = seed(database, spec=http_spec(http_target.url("/slow"))).execution_ids
    worker = make_worker()
    server = metrics_server(worker, settings(worker_metrics_port=0))
    assert server is not None
    try:
        assert worker.run_once() == 1  # claimed and committed; its delivery takes 0.5 s
        with database.connection() as locker:
            # The row locked, the finalizer's record waits once the delivery has ended.
            locker.run("BEGIN")
            locker.run(
                "SELECT 1 FROM executions WHERE execution_id = :id FOR UPDATE", id=execution_id
            )
            try:
                wait_for(lambda: worker.occupancy == (1, 1), "the attempt waiting", timeout=10)
                held = _samples(_get(f"http://127.0.0.1:{server.port}/metrics")[2])
            finally:
                locker.run("COMMIT")
        assert worker.drain(10)
        after = _samples(_get(f"http://127.0.0.1:{server.port}/metrics")[2])
    finally:
        server.stop()
    assert (held[("te_worker_in_flight", ())], held[("te_worker_awaiting_record", ())]) == (1, 1)
    assert (after[("te_worker_in_flight", ())], after[("te_worker_awaiting_record", ())]) == (0, 0)
    assert after[("te_worker_finalized_total", (("outcome", "succeeded"),))] == 1


def _samples(text: str) -> dict[tuple[str, tuple[Any, ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_no_port_no_server_and_the_default_host_is_loopback(
    make_worker: Callable[..., Worker],
) -> None:
    assert metrics_server(make_worker(), settings()) is None
    assert load_settings({}).worker_metrics_host == "127.0.0.1"
    port = free_port()
    server = metrics_server(make_worker(), settings(worker_metrics_port=port))
    assert server is not None
    try:
        assert server.port == port
        assert _get(f"http://127.0.0.1:{port}/metrics")[0] == 200
    finally:
        server.stop()


@pytest.mark.parametrize("raw", ["-1", "70000", "x"])
def test_a_bad_port_is_a_configuration_error(raw: str) -> None:
    with pytest.raises(ConfigurationError, match="TE_WORKER_METRICS_PORT"):
        load_settings({"TE_WORKER_METRICS_PORT": raw})


def test_the_running_worker_serves_the_port_and_closes_it_on_stop(
    make_worker: Callable[..., Worker],
) -> None:
    from chalicelib.worker.background import running_background

    port = free_port()
    worker = make_worker()
    with running_background(worker, settings(worker_metrics_port=port)):
        assert _get(f"http://127.0.0.1:{port}/metrics")[0] == 200
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5)
