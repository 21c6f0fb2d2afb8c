"""``GET /health`` while the database is stalled (its processes stopped with ``SIGSTOP``):
it answers 503 ``DATABASE_UNAVAILABLE`` within its socket timeouts instead of hanging.

The server is this test's own (the session's is shared by every test): the one
``tests/chaos/pg_restart.py`` starts, its postmaster and every backend stopped, then
continued, whatever happens.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.chaos.pg_restart import RestartablePostgres
from tests.support.api_client import ApiClient, Reply

#: How long the test waits for the answer: generous against the health pool's bound (one
#: read and one reconnect of chalicelib.health.probe.HEALTH_TIMEOUT_SEC, 2 s, each), far
#: below the API pool's 30 s per socket operation.
ANSWER_WAIT_SEC = 12.0


@pytest.fixture
def dedicated_pg() -> Iterator[RestartablePostgres]:
    pg = RestartablePostgres.create()
    yield pg
    pg.close()


@pytest.fixture
def db_url(dedicated_pg: RestartablePostgres) -> str:
    """Overrides the session fixture: ``api`` serves from this test's own server."""
    return dedicated_pg.url()


def _server_pids(pg: RestartablePostgres) -> list[int]:
    """The postmaster and its children (every backend and background process)."""
    postmaster = int((pg.pgdata / "postmaster.pid").read_text().split()[0])
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the process ended meanwhile
        if int(fields[1]) == postmaster:
            children.append(int(stat.parent.name))
    return [postmaster, *children]


def test_health_answers_503_while_the_database_is_stalled(
    api: ApiClient, dedicated_pg: RestartablePostgres
) -> None:
    assert api.get("/health", auth=False).status == 200  # the health pool holds a connection
    answers: list[Reply] = []
    pids = _server_pids(dedicated_pg)
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        # Liveness reads nothing: it answers at once while the database cannot.
        assert api.get("/health/live", auth=False).status == 200
        asking = threading.Thread(target=lambda: answers.append(api.get("/health", auth=False)))
        asking.start()
        asking.join(ANSWER_WAIT_SEC)
        answered = list(answers)
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
        asking.join()
    assert answered, "/health did not answer while the database was stalled"
    assert answered[0].status == 503
    assert answered[0].error_code == "DATABASE_UNAVAILABLE"
    assert api.get("/health", auth=False).status == 200  # and recovers with the database
