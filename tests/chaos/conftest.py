"""Chaos fixtures: a dedicated PostgreSQL server for tests that restart it or count its
errors (the session server is shared by every test of the session)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.chaos.pg_restart import RestartablePostgres


@pytest.fixture
def dedicated_pg() -> Iterator[RestartablePostgres]:
    """A server of this test's own; a module overrides ``db_url`` with ``dedicated_pg.url()``
    so that ``database``, ``app_env`` and ``api`` use it."""
    pg = RestartablePostgres.create()
    yield pg
    pg.close()
