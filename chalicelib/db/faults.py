"""Which failures a retry later can fix (transient) and which a row causes (persistent).

The background loops retry a transient failure as it is: the database is away or
contended, and the same batch will go through once it is back. Any other failure of a
batch may come from one of its rows (a value the database refuses, a constraint it
breaks, a value the code cannot handle), so the loops then fall back to the rows one by
one and set aside the row that fails alone (see the scheduler's loops and the worker's
finalizer).
"""

from __future__ import annotations

from chalicelib.db.statements import sqlstate
from chalicelib.errors import DatabaseUnavailable, TransactionRetriesExhausted

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
