"""The deployed shape, end to end, in LocalStack without Docker.

The ``lean`` profile as docs/how-to/deploy.md deploys it (``localstack_deployment``): the
API behind API Gateway's REST API, the three scheduler Lambdas and the long-poll worker
Lambda on EventBridge ``rate(1 minute)`` rules, each function a host process run by the
project's executor, the session's PostgreSQL as database. Everything goes through the
API Gateway URL, as a client's requests would: an HTTP endpoint (a sink on loopback),
IMMEDIATE, DELAYED and CRON jobs; the worker Lambda delivers them; the scheduler Lambdas
fire on their schedule; executions, attempts and /health read back.

EventBridge fires once a minute, so this module takes two to three minutes; ``make test``
runs it in a process of its own beside the main suite.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import time
import urllib.parse
import urllib.request
import uuid
import zipfile
from dataclasses import dataclass
from typing import Any

import pytest

from tests.localstack import server
from tests.localstack.plugin import GUARD_PROBES, Deployment
from tests.support.served import HttpTarget, call_api
from tests.support.waiting import wait_for

pytestmark = pytest.mark.localstack

SCHEDULER_FUNCTIONS = (
    "materialize_cron_ticks",
    "promote_delayed_executions",
    "reclaim_stuck_executions",
)
#: The loop each scheduler function's one pass runs (its loop_lag log line names it).
SCHEDULER_LOOPS = {
    "materialize_cron_ticks": "cron_materializer",
    "promote_delayed_executions": "delayed_promoter",
    "reclaim_stuck_executions": "stuck_reclaimer",
}
#: The first EventBridge run can be a minute after the deploy; a CRON tick one more.
DELIVERY_TIMEOUT = 240.0


@dataclass(frozen=True)
class Scenario:
    """The endpoint and the three jobs created right after the deploy."""

    api: str
    key: str
    path: str
    executions: dict[str, str]  #: trigger -> execution id (the CRON job's: its job id)
    delayed_run_at: dt.datetime
    created_at: float


def _api(deployment: Deployment, method: str, path: str, body: Any = None) -> Any:
    status, reply = call_api(deployment.api_url, deployment.api_key, method, path, body)
    assert status < 300, f"{method} {path}: {status} {reply}"
    return reply


@pytest.fixture(scope="module")
def scenario(localstack_deployment: Deployment, localstack_sink: HttpTarget) -> Scenario:
    """An HTTP endpoint to the sink and an IMMEDIATE, a DELAYED and a CRON job."""
    tag = uuid.uuid4().hex[:8]
    path = f"/deliveries/{tag}"
    _api(
        localstack_deployment,
        "POST",
        "/endpoints",
        {
            "name": f"sink-{tag}",
            "type": "HTTP",
            "spec": {
                "url": localstack_sink.url(path),
                "method": "POST",
                "body_template": {"trigger": "{{input.trigger}}"},
            },
        },
    )
    run_at = dt.datetime.now(dt.UTC).replace(microsecond=0) + dt.timedelta(seconds=40)
    jobs = {
        "IMMEDIATE": {"idempotency_key": f"imm-{tag}"},
        "DELAYED": {"idempotency_key": f"del-{tag}", "run_at": run_at.isoformat()},
        "CRON": {"cron": "* * * * *", "timezone": "UTC"},
    }
    executions = {}
    for trigger, fields in jobs.items():
        job = _api(
            localstack_deployment,
            "POST",
            "/jobs",
            {
                "endpoint": f"sink-{tag}",
                "trigger": trigger,
                "input": {"trigger": trigger},
                **fields,
            },
        )
        executions[trigger] = (
            job["job_id"] if trigger == "CRON" else job["execution"]["execution_id"]
        )
    return Scenario(
        api=localstack_deployment.api_url,
        key=localstack_deployment.api_key,
        path=path,
        executions=executions,
        delayed_run_at=run_at,
        created_at=time.time(),
    )


def _delivered(sink: HttpTarget, path: str) -> dict[str, float]:
    """trigger -> when the sink first got its delivery."""
    first: dict[str, float] = {}
    for received in sink.received(path):
        first.setdefault(received.json()["trigger"], received.at)
    return first


def test_health_answers_through_api_gateway(localstack_deployment: Deployment) -> None:
    health = _api(localstack_deployment, "GET", "/health")
    assert health["status"] == "ok"
    assert health["database"] == "ok"
    assert health["profile"] == "lean"


def test_the_worker_lambda_delivers_immediate_delayed_and_cron_runs(
    scenario: Scenario, localstack_sink: HttpTarget
) -> None:
    delivered = wait_for(
        lambda: _delivered(localstack_sink, scenario.path),
        "the sink got the IMMEDIATE, DELAYED and CRON deliveries",
        until=lambda got: set(scenario.executions) <= set(got),
        timeout=DELIVERY_TIMEOUT,
        interval=1.0,
    )
    read = _reader(scenario)
    for trigger in ("IMMEDIATE", "DELAYED"):
        execution_id = scenario.executions[trigger]
        execution = wait_for(
            lambda execution_id=execution_id: read(f"/executions/{execution_id}"),
            f"the {trigger} execution is SUCCESS",
            until=lambda e: e["status"] == "SUCCESS",
            timeout=30,
            interval=0.5,
        )
        assert execution["attempt_count"] == 1
        attempts = read(f"/executions/{execution_id}/attempts")["items"]
        assert [(a["attempt_number"], a["status"]) for a in attempts] == [(1, "SUCCESS")]
        assert attempts[0]["output"]["status_code"] == 200
    assert delivered["DELAYED"] >= scenario.delayed_run_at.timestamp() - 0.5
    # The cron job's run: a tick on a whole minute, delivered at or after it (the first
    # tick of a job created less than a pass before it is up to a minute late in lean).
    runs = read(f"/jobs/{scenario.executions['CRON']}/executions")["items"]
    [tick] = [run for run in runs if run["status"] == "SUCCESS"][-1:]
    run_at = dt.datetime.fromisoformat(tick["run_at"].replace("Z", "+00:00"))
    assert (run_at.second, run_at.microsecond) == (0, 0)
    assert delivered["CRON"] >= run_at.timestamp() - 0.5


def _reader(scenario: Scenario) -> Any:
    def read(path: str) -> Any:
        status, reply = call_api(scenario.api, scenario.key, "GET", path)
        assert status == 200, f"GET {path}: {status} {reply}"
        return reply

    return read


def test_eventbridge_invokes_each_scheduled_function_every_minute(
    host_localstack: server.HostLocalStack, localstack_deployment: Deployment
) -> None:
    events = host_localstack.client("events")
    targets = {}
    for rule in events.list_rules()["Rules"]:
        assert rule.get("ScheduleExpression") == "rate(1 minute)", rule
        for target in events.list_targets_by_rule(Rule=rule["Name"])["Targets"]:
            targets[target["Arn"].rsplit(":", 1)[-1]] = rule["Name"]
    functions = localstack_deployment.functions()
    scheduled = {functions[name] for name in (*SCHEDULER_FUNCTIONS, "run_worker")}
    assert scheduled == set(targets)


def test_the_scheduler_lambdas_fire_on_their_schedule(
    host_localstack: server.HostLocalStack, localstack_deployment: Deployment
) -> None:
    logs = host_localstack.client("logs")
    functions = localstack_deployment.functions()
    for name in SCHEDULER_FUNCTIONS:
        group = f"/aws/lambda/{functions[name]}"
        messages = wait_for(
            lambda group=group: _messages(logs, group),
            f"{name} was invoked by its schedule and ran its pass",
            until=lambda lines, name=name: any(
                _event(line).get("loop") == SCHEDULER_LOOPS[name] for line in lines
            ),
            timeout=DELIVERY_TIMEOUT,
            interval=2.0,
        )
        reports = [line for line in messages if line.startswith("REPORT RequestId:")]
        assert reports, f"{name}: no finished invocation in {group}"
        # lean: one pass per invocation within the 10 s budget (no "Task timed out").
        assert not [line for line in messages if "Task timed out" in line], messages


def test_the_deployed_package_carries_no_test_code(
    host_localstack: server.HostLocalStack, localstack_deployment: Deployment
) -> None:
    """The executor, the guard and every test stay out of the Lambda package."""
    functions = host_localstack.client("lambda")
    code = functions.get_function(FunctionName=localstack_deployment.functions()["run_worker"])
    # The URL names LocalStack by its own host name, which this process does not resolve:
    # the request goes to its loopback port with that name as Host.
    location = urllib.parse.urlsplit(code["Code"]["Location"])
    direct = location._replace(netloc=f"127.0.0.1:{host_localstack.port}").geturl()
    request = urllib.request.Request(direct, headers={"Host": location.netloc})  # noqa: S310
    with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310 - loopback
        names = zipfile.ZipFile(io.BytesIO(response.read())).namelist()
    assert "app.py" in names
    assert any(name.startswith("chalicelib/") for name in names)
    assert not [
        n for n in names if n.startswith("tests/") or "te_hostlambda" in n or "loopback_guard" in n
    ]


def test_health_sees_the_scheduler_and_the_worker(localstack_deployment: Deployment) -> None:
    health = _api(localstack_deployment, "GET", "/health")
    processes = health["processes"]
    assert processes["worker"] >= 1, health
    assert processes["scheduler"] >= 1, health


def test_nothing_but_the_guard_probes_was_refused(host_localstack: server.HostLocalStack) -> None:
    """LocalStack and the deployed functions ran on loopback alone (test_localstack_guard.py
    makes the only attempts outside it, on purpose)."""
    refused = [
        line
        for line in host_localstack.refusals()
        if not any(probe in line["target"] for probe in GUARD_PROBES)
    ]
    assert refused == []


def _messages(logs: Any, group: str) -> list[str]:
    try:
        events = logs.filter_log_events(logGroupName=group)["events"]
    except logs.exceptions.ResourceNotFoundException:
        return []
    return [str(event["message"]).rstrip("\n") for event in events]


def _event(line: str) -> dict[str, Any]:
    try:
        value = json.loads(line)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
