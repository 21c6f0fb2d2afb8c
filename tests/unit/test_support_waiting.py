"""The shared wait: it returns the value that satisfied it and fails naming the last one."""

from __future__ import annotations

import itertools

import pytest

from tests.support.waiting import wait_for


def test_returns_the_first_value_that_satisfies_the_condition() -> None:
    counter = itertools.count()
    assert wait_for(lambda: next(counter), "3", until=lambda n: n >= 3, interval=0) == 3


def test_a_timeout_names_what_was_awaited_and_the_last_value() -> None:
    with pytest.raises(AssertionError, match=r"the queue to drain \(last value: \{'QUEUED': 2\}\)"):
        wait_for(lambda: {"QUEUED": 2}, "the queue to drain", until=lambda c: not c, timeout=0)
