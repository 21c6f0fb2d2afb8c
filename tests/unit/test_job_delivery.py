"""A job's own delivery settings, pure: durations, URL prefixes, the retry window and
expiry (no database, no clock: times are given)."""

from __future__ import annotations

import pytest

from chalicelib.domain.backoff import RetryPolicy, decide_retry
from chalicelib.domain.endpoints import parse_endpoint, validate_retry_policy
from chalicelib.domain.job_delivery import is_expired, parse_delivery_overrides
from chalicelib.domain.url_prefixes import check_job_url, check_prefixes, url_problem
from chalicelib.errors import InvalidTarget, ValidationFailed
from chalicelib.worker.models import ClaimedExecution

PREFIXES = ["https://hooks.example.com/tenants/"]


def test_a_url_under_a_prefix_passes_host_case_and_default_port_aside() -> None:
    assert url_problem("https://hooks.example.com/tenants/a?x=1", PREFIXES) is None
    assert url_problem("https://HOOKS.Example.COM/tenants/a", PREFIXES) is None
    assert url_problem("https://hooks.example.com:443/tenants/a", PREFIXES) is None


@pytest.mark.parametrize(
    "url",
    [
        "https://hooks.example.com.evil.test/tenants/a",  # a longer host
        "https://hooks.example.com@evil.test/tenants/a",  # user info
        "https://user:pw@hooks.example.com/tenants/a",
        "https://hooks.example.com/tenants/../admin",  # dot segments
        "https://hooks.example.com/tenants/%2e%2e/admin",
        "https://hooks.example.com/tenants/a/./b",
        "https://hooks.example.com/tenants%2fa",  # percent-encoded slashes
        "https://hooks.example.com/tenants/a%2F..%2Fadmin",
        "https://hooks.example.com/tenants/a%5cb",
        "https://hooks.example.com:8443/tenants/a",  # a different port
        "http://hooks.example.com/tenants/a",  # a different scheme (and port)
        "https://hooks.example.com/tenants-admin/a",  # a prefix is a whole path segment
        "https://hooks.example.com/tenants",
        "https://hooks.example.com\\@evil.test/tenants/a",  # a backslash
        "https://hooks.example.com/tenants/a#frag",
        "https://hooks.example.com./tenants/a",  # a trailing dot is another name
        "https://hooks.exämple.com/tenants/a",
        "//hooks.example.com/tenants/a",
    ],
)
def test_urls_that_could_leave_the_prefix_never_pass(url: str) -> None:
    assert url_problem(url, PREFIXES) is not None


def test_a_job_url_refusal_is_422_naming_the_field() -> None:
    with pytest.raises(InvalidTarget, match=r"Field 'url'.*matches none"):
        check_job_url("https://evil.test/", {"allowed_url_prefixes": PREFIXES})
    with pytest.raises(InvalidTarget, match=r"Field 'url'.*allows no job URL"):
        check_job_url("https://hooks.example.com/tenants/a", {"url": "https://x.test/"})


@pytest.mark.parametrize(
    "prefix",
    [
        "https://hooks.example.com/tenants",  # does not end in /
        "https://hooks.example.com/?a=1",
        "ftp://hooks.example.com/",
        "https:///",
        "https://u@hooks.example.com/",
        "https://hooks.example.com/a/../",
    ],
)
def test_prefixes_are_absolute_http_urls_with_a_host_ending_in_a_slash(prefix: str) -> None:
    with pytest.raises(InvalidTarget, match=r"spec.allowed_url_prefixes\[1\]"):
        check_prefixes("spec.allowed_url_prefixes", ["https://ok.example.com/", prefix])


def test_prefixes_are_an_http_spec_field_checked_when_written() -> None:
    body = {
        "name": "fan",
        "type": "HTTP",
        "spec": {"url": "https://a.test/", "method": "POST", "allowed_url_prefixes": []},
    }
    with pytest.raises(InvalidTarget, match="allowed_url_prefixes"):
        parse_endpoint(body)
    body["spec"]["allowed_url_prefixes"] = PREFIXES
    assert parse_endpoint(body).spec["allowed_url_prefixes"] == PREFIXES


def test_job_overrides_keep_only_what_is_given() -> None:
    body = {"retry_policy": {"max_attempts": 3}, "timeout_ms": 500, "expire_after": "1m"}
    assert parse_delivery_overrides(body) == {
        "retry_policy": {"max_attempts": 3},
        "timeout_ms": 500,
        "expire_after_ms": 60_000,
    }
    assert parse_delivery_overrides({}) is None


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"retry_policy": {"max_attempts": 0}}, "retry_policy.max_attempts"),
        ({"retry_policy": {"max_retry_duration_ms": 0}}, "retry_policy.max_retry_duration_ms"),
        ({"retry_policy": {"jitter": 1}}, "Unknown field.*jitter"),
        ({"retry_policy": {"initial_delay_ms": 9, "max_delay_ms": 1}}, "initial_delay_ms"),
        ({"timeout_ms": 300_001}, "'timeout_ms'"),
        ({"timeout_ms": True}, "'timeout_ms'"),
        ({"expire_after": "soon"}, "'expire_after'"),
        ({"expire_after": "0ms"}, "'expire_after'"),
        ({"url": 7}, "'url'"),
    ],
)
def test_bad_job_overrides_are_400_naming_the_field(body: dict, message: str) -> None:
    with pytest.raises(ValidationFailed, match=message):
        parse_delivery_overrides(body)


def test_an_endpoint_policy_accepts_a_retry_window() -> None:
    policy = validate_retry_policy({"max_retry_duration_ms": 60_000})
    assert policy["max_retry_duration_ms"] == 60_000
    assert RetryPolicy.from_json(policy).max_retry_duration_ms == 60_000
    assert "max_retry_duration_ms" not in validate_retry_policy({"max_attempts": 2})


def test_no_retry_is_scheduled_past_the_window() -> None:
    policy = RetryPolicy(max_attempts=10, initial_delay_ms=1000, max_retry_duration_ms=5000)
    fixed = 0.5  # no jitter
    assert decide_retry(policy, 1, rand=lambda: fixed, elapsed_ms=3000).retry
    late = decide_retry(policy, 2, rand=lambda: fixed, elapsed_ms=3500)  # 3.5 s + 2 s > 5 s
    assert not late.retry
    assert "max_retry_duration_ms (5000 ms)" in late.reason
    assert decide_retry(RetryPolicy(max_attempts=3), 1, elapsed_ms=10**9).retry  # no window


def test_expiry_applies_once_the_start_is_that_late() -> None:
    overrides = {"expire_after_ms": 1000}
    assert not is_expired(overrides, 999)
    assert is_expired(overrides, 1000)
    assert not is_expired(None, 10**9)
    assert not is_expired(overrides, None)  # not a first attempt


def _claimed(**row: object) -> ClaimedExecution:
    base = {
        "execution_id": "exec_1",
        "job_id": "job_1",
        "endpoint": "e",
        "endpoint_type": "HTTP",
        "input": {},
        "attempt_count": 1,
        "max_attempts": 5,
        "config_snapshot": None,
        "endpoint_snapshot": '{"spec": {}, "retry_policy": {"max_attempts": 2, '
        '"backoff": "linear", "initial_delay_ms": 10, "max_delay_ms": 100}}',
    }
    return ClaimedExecution.from_row({**base, **row})


def test_a_claimed_execution_expires_while_it_waits_for_its_send() -> None:
    fresh = _claimed(delivery_overrides={"expire_after_ms": 1000}, late_ms=500)
    assert not fresh.expired()
    waited = _claimed(delivery_overrides={"expire_after_ms": 1000}, late_ms=500)
    object.__setattr__(waited, "claimed_at", waited.claimed_at - 0.6)  # 600 ms later
    assert waited.expired()


def test_a_claimed_execution_takes_its_jobs_retry_fields_over_the_snapshots() -> None:
    policy = _claimed(delivery_overrides={"retry_policy": {"initial_delay_ms": 50}}).retry_policy
    assert (policy.backoff, policy.initial_delay_ms, policy.max_attempts) == ("linear", 50, 5)
