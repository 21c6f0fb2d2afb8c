"""The one execution transition table."""

from __future__ import annotations

import itertools

import pytest

from chalicelib.domain.statuses import (
    EXECUTION_TRANSITIONS,
    ExecutionStatus,
    can_transition,
    check_transition,
    promotion_sources,
    requeue_sources,
    sources_of,
)
from chalicelib.errors import InvalidTransition

S = ExecutionStatus

ALLOWED = {
    (S.PENDING, S.QUEUED),
    (S.PENDING, S.CANCELLED),
    (S.QUEUED, S.RUNNING),
    (S.QUEUED, S.CANCELLED),
    (S.RUNNING, S.SUCCESS),
    (S.RUNNING, S.FAILED),
    (S.RUNNING, S.RETRYING),
    (S.RETRYING, S.RUNNING),
    (S.RETRYING, S.CANCELLED),
    (S.FAILED, S.QUEUED),  # retry / redrive of a dead letter
}


def test_table_has_every_status() -> None:
    assert set(EXECUTION_TRANSITIONS) == set(ExecutionStatus)


@pytest.mark.parametrize("current,target", sorted(ALLOWED))
def test_allowed_transitions(current: S, target: S) -> None:
    assert can_transition(current, target)
    check_transition(current.value, target.value)


@pytest.mark.parametrize(
    "current,target",
    sorted(set(itertools.product(ExecutionStatus, repeat=2)) - ALLOWED),
)
def test_every_other_transition_is_refused(current: S, target: S) -> None:
    assert not can_transition(current, target)
    with pytest.raises(InvalidTransition) as info:
        check_transition(current, target)
    assert info.value.status == 409


def test_terminal_statuses_have_no_way_out_but_an_operators_requeue() -> None:
    for status in (S.SUCCESS, S.FAILED, S.CANCELLED):
        assert status.is_terminal
    assert EXECUTION_TRANSITIONS[S.SUCCESS] == EXECUTION_TRANSITIONS[S.CANCELLED] == frozenset()
    assert EXECUTION_TRANSITIONS[S.FAILED] == frozenset({S.QUEUED})
    assert requeue_sources() == ["FAILED"]
    assert promotion_sources() == ["PENDING"]  # the promoter never requeues a dead letter
    assert not any(s.is_terminal for s in (S.PENDING, S.QUEUED, S.RUNNING, S.RETRYING))


def test_sources_are_the_update_guards() -> None:
    assert sources_of(S.CANCELLED) == ["PENDING", "QUEUED", "RETRYING"]
    assert sources_of(S.RUNNING) == ["QUEUED", "RETRYING"]
    assert sources_of(S.QUEUED) == ["FAILED", "PENDING"]
    assert sources_of(S.SUCCESS) == ["RUNNING"]
    assert sources_of(S.PENDING) == []
