"""One way to wait for a state: poll until it holds, fail naming it and the last value.

The timeout is a guard against hanging, never the thing a test asserts: a test that waits
and then checks the state it waited for says what it needs in the state, not in seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def _truthy(value: object) -> bool:
    return bool(value)


def wait_for(
    probe: Callable[[], T],
    what: str,
    *,
    until: Callable[[T], bool] = _truthy,
    timeout: float = 20.0,
    interval: float = 0.02,
) -> T:
    """Call ``probe`` until ``until(value)`` holds (by default: the value is truthy).

    Returns that value. After ``timeout`` seconds raises AssertionError naming ``what`` and
    the last value seen, so a failure says where the state stopped.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if until(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:g} s: {what} (last value: {value!r})")
        time.sleep(interval)
