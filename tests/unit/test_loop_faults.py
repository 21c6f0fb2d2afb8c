"""Which failures set a row aside and which make a loop fail and report."""

from __future__ import annotations

import pytest
from pg8000.exceptions import DatabaseError as PgDatabaseError

from chalicelib.db.connection import translate_error
from chalicelib.db.faults import is_row_fault, is_transient
from chalicelib.domain.loops import fault_reason
from chalicelib.errors import DatabaseUnavailable, TransactionRetriesExhausted


def server_error(state: str) -> BaseException:
    """The service's error for a server error of SQLSTATE ``state``, as connection.py
    raises it (translated, the driver's error as its cause)."""
    cause = PgDatabaseError({"C": state, "M": "refused"})
    try:
        raise translate_error(cause, "q") from cause
    except Exception as exc:
        return exc


@pytest.mark.parametrize(
    ("error", "transient", "row"),
    [
        (DatabaseUnavailable("down"), True, False),
        (TransactionRetriesExhausted("contended"), True, False),
        (server_error("57014"), True, False),  # statement timeout
        (server_error("22P02"), False, True),  # a value of the wrong syntax
        (server_error("22P05"), False, True),  # U+0000 in JSONB
        (server_error("23502"), False, True),  # NOT NULL
        (server_error("23503"), False, True),  # foreign key
        (server_error("42501"), False, False),  # permission: the same for every row
        (server_error("42P01"), False, False),  # a missing table: the same for every row
        (TypeError("a str where a datetime is expected"), False, True),
        (AttributeError("'NoneType' object has no attribute 'lower'"), False, True),
    ],
)
def test_classification(error: BaseException, transient: bool, row: bool) -> None:
    assert (is_transient(error), is_row_fault(error)) == (transient, row)


def test_a_reason_is_bounded_and_has_no_nul() -> None:
    reason = fault_reason(ValueError("bad\x00value " + "x" * 1000))
    assert reason.startswith("ValueError: badvalue ")
    assert "\x00" not in reason and len(reason) == 500 and reason.endswith("...")
