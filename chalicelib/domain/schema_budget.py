"""One time budget for the JSON Schema work of a request, checked wherever that work loops.

Regexes are linear on RE2 (:mod:`.schema_regex`), but a schema can still multiply work
without one (nested ``allOf`` of two refs doubles it per level), an input of 100,000 keys
meets every ``patternProperties`` pattern, and a single keyword can loop over a whole input
(``items`` into an empty schema, ``uniqueItems``). A budget checked only when a keyword
starts lets one such keyword run for minutes, so the work checks it where it loops:

* at every keyword (:func:`budgeted`) and every descent into a subschema
  (:mod:`.schema_keywords` installs both on the validator class);
* inside the loops of the keywords this service implements itself (:func:`paced`,
  :func:`checkpoint`).

Past the deadline the work raises :class:`BudgetExceeded`; callers answer 422.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")


class BudgetExceeded(Exception):
    """Validation ran past its time budget (the schema or the input is too costly)."""


@dataclass(slots=True)
class _Deadline:
    """This thread's budget: when it ends, on which clock, and when to yield the GIL."""

    at: float
    clock: Callable[[], float]
    next_yield: float = 0.0


_thread = threading.local()


@contextmanager
def time_budget(seconds: float, clock: Callable[[], float] = time.monotonic) -> Iterator[None]:
    """Schema work on this thread raises :class:`BudgetExceeded` after ``seconds``.

    Budgets nest: an inner one never extends an outer one, so a request that opens one
    budget for all its items (a batch) spends it once, however many validations run in it.
    """
    previous: _Deadline | None = getattr(_thread, "deadline", None)
    at = clock() + seconds
    if previous is not None and previous.clock is clock:
        at = min(at, previous.at)
    _thread.deadline = _Deadline(at, clock)
    try:
        yield
    finally:
        _thread.deadline = previous


def budget_spent() -> bool:
    """True when this thread's validation budget has run out (False outside a budget)."""
    deadline: _Deadline | None = getattr(_thread, "deadline", None)
    return deadline is not None and deadline.clock() > deadline.at


#: How long a validation runs before it lets the process's other threads run (below).
YIELD_EVERY_SEC = 0.0001


def checkpoint() -> None:
    """Raise :class:`BudgetExceeded` if this thread's budget is spent (no-op outside one).

    Validation is pure Python and holds the GIL: a costly one (a whole budget) would make
    every other thread of the process (other requests, a worker's deliveries in the local
    stack) wait the interpreter's 5 ms switch interval at each hand-over. Giving the GIL up
    after every 0.1 ms of work here lets them go first.
    """
    deadline: _Deadline | None = getattr(_thread, "deadline", None)
    if deadline is None:
        return
    now = deadline.clock()
    if now > deadline.at:
        raise BudgetExceeded
    if now >= deadline.next_yield:
        time.sleep(0)
        # Counted from the end of the sleep, which itself takes about 0.1 ms: counted from
        # its start, every checkpoint would sleep again and the work would barely run.
        deadline.next_yield = deadline.clock() + YIELD_EVERY_SEC


#: Items a loop handles between two checkpoints: each costs at most a few microseconds.
PACE = 64


def paced(items: Iterable[T]) -> Iterator[T]:
    """``items``, with a :func:`checkpoint` every :data:`PACE` of them."""
    for index, item in enumerate(items):
        if index % PACE == 0:
            checkpoint()
        yield item


def budgeted(function: Callable[..., T]) -> Callable[..., T]:
    """``function`` with a :func:`checkpoint` before each call (a keyword)."""

    @functools.wraps(function)
    def checked(*args: Any, **kwargs: Any) -> T:
        checkpoint()
        return function(*args, **kwargs)

    return checked
