"""Which failures a retry later can fix (transient) and which a row causes.

The background loops retry a transient failure as it is: the database is away or
contended, and the same batch will go through once it is back. A failure a row can cause
(a value the database refuses, a constraint it breaks, a value the code cannot handle:
:func:`is_row_fault`) makes them fall back to the rows one by one and set aside the row
that fails alone (see the scheduler's loops and the worker's finalizer). Any other failure
(a missing table, a permission) is the same for every row: the loop fails and reports it.
"""

from __future__ import annotations

from chalicelib.db.statements import sqlstate
from chalicelib.errors import (
    DatabaseError,
    DatabaseUnavailable,
    ForeignKeyViolation,
    InvalidData,
    TransactionRetriesExhausted,
    UniqueViolation,
)

#: SQLSTATE classes of failures that are about the server, not the statement's data:
#: 08 connection, 40 transaction rollback, 53 insufficient resources, 55 object not in
#: prerequisite state (lock not available), 57 operator intervention (statement timeout,
#: shutdown), 58 system error.
TRANSIENT_CLASSES = frozenset({"08", "40", "53", "55", "57", "58"})


def is_transient(exc: BaseException) -> bool:
    """True if the same work may well succeed later unchanged (an outage, contention)."""
    if isinstance(exc, DatabaseUnavailable | TransactionRetriesExhausted):
        return True
    cause = exc.__cause__
    state = sqlstate(cause) if cause is not None else None
    return state is not None and state[:2] in TRANSIENT_CLASSES


#: SQLSTATE classes of failures that come from the values a statement wrote or read:
#: 22 data exception (a value out of range, of the wrong syntax, U+0000 in JSONB), 23
#: integrity constraint violation (NOT NULL, foreign key, unique, check).
ROW_CLASSES = frozenset({"22", "23"})


def is_row_fault(exc: BaseException) -> bool:
    """True if ``exc`` can come from one row's values, so that setting that row aside is
    the remedy: an exception of the code itself (a value of a type or shape it did not
    expect), or a database refusal of class 22 or 23. Anything else (an outage, a missing
    table, a permission, a read-only database) is the same for every row: setting rows
    aside for it would empty the queue, so the loops fail and report instead."""
    if not isinstance(exc, DatabaseError):
        return isinstance(exc, Exception)
    if isinstance(exc, InvalidData | UniqueViolation | ForeignKeyViolation):
        return True
    cause = exc.__cause__
    state = sqlstate(cause) if cause is not None else None
    return state is not None and state[:2] in ROW_CLASSES
