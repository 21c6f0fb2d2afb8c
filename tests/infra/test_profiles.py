"""The deployment profiles: what docs/how-to/deploy.md promises of each template.

The page's table "What each profile deploys" is read as data (one column per profile) and
checked against the synthesized templates: which Lambda functions exist with which budget
and memory, the Fargate worker and its network, NAT gateways, and the alarms. Further tests
pin what the page says in prose: no loop runs twice in ``lean``, its scheduler makes one
pass per minute with a look-ahead while its worker Lambda hosts the fast promoter and
materializer, no public IP unless asked. Each scheduled function's timeout and settings
overrides are ``chalicelib/profiles.py``'s, the table the local stack (``make run
PROFILE=lean``) invokes too, and every process knows its profile (``TE_PROFILE``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from chalicelib import profiles
from tests.support.infra import REPO_ROOT, Synthesis

DEPLOY_DOC = REPO_ROOT / "docs" / "how-to" / "deploy.md"
TABLE_TITLE = "What each profile deploys"
SCHEDULER_FUNCTIONS = ("MaterializeCronTicks", "PromoteDelayedExecutions", "ReclaimStuckExecutions")
ALL_FUNCTIONS = ("APIHandler", *SCHEDULER_FUNCTIONS, "RunWorker")


def _profile_table(path: Path = DEPLOY_DOC) -> dict[str, dict[str, str]]:
    """Column header (profile) -> row label -> cell, from the table after TABLE_TITLE."""
    text = path.read_text(encoding="utf-8")
    lines = text[text.index(TABLE_TITLE) :].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    header, body = rows[0], rows[2:]
    return {
        column: {row[0]: row[index] for row in body}
        for index, column in enumerate(header)
        if index > 0
    }


def _column(synthesis_name: str) -> str:
    return {
        "synthesis": "`full`",
        "lean_synthesis": "`lean`",
        "lean_fargate_synthesis": "`lean`, `worker=fargate`",
    }[synthesis_name]


def _function_row(cells: dict[str, str], logical_id: str) -> str:
    (label,) = [label for label in cells if label.startswith(f"`{logical_id}`")]
    return cells[label]


def _functions(synthesis: Synthesis) -> dict[str, dict[str, Any]]:
    return {
        logical_id: resource["Properties"]
        for logical_id, resource in synthesis.resources("AWS::Serverless::Function").items()
    }


PROFILES = ["synthesis", "lean_synthesis", "lean_fargate_synthesis"]
#: chalice function name -> the template's logical id.
LOGICAL_IDS = {
    "materialize_cron_ticks": "MaterializeCronTicks",
    "promote_delayed_executions": "PromoteDelayedExecutions",
    "reclaim_stuck_executions": "ReclaimStuckExecutions",
    "run_worker": "RunWorker",
}
#: Each synthesis: (its profile, the table of its scheduled functions, in chalicelib/profiles.py).
TABLES = {
    "synthesis": ("full", profiles.PROFILES["full"]),
    "lean_synthesis": ("lean", profiles.PROFILES["lean"]),
    # The lean scheduler with the worker on Fargate: no RunWorker to host the fast loops.
    "lean_fargate_synthesis": (
        "lean",
        profiles.deployment_functions(scheduler_loop=False, lone_worker=False),
    ),
}


@pytest.fixture(params=PROFILES)
def profile(request: pytest.FixtureRequest) -> tuple[dict[str, str], Synthesis]:
    """(the page's column for a profile, that profile's synthesized template)."""
    return _profile_table()[_column(request.param)], request.getfixturevalue(request.param)


def test_the_table_has_a_column_for_each_synthesized_profile() -> None:
    table = _profile_table()
    assert set(table) == {_column(name) for name in PROFILES}
    for cells in table.values():
        for logical_id in ALL_FUNCTIONS:
            _function_row(cells, logical_id)  # every function has its row


def test_functions_timeouts_and_memory_are_as_documented(
    profile: tuple[dict[str, str], Synthesis],
) -> None:
    cells, synthesis = profile
    functions = _functions(synthesis)
    documented = {}
    for logical_id in ALL_FUNCTIONS:
        cell = _function_row(cells, logical_id)
        if cell == "none":
            continue
        match = re.fullmatch(r"(\d+) s, (\d+) MB", cell)
        assert match, f"{logical_id}: {cell!r}"
        documented[logical_id] = (int(match[1]), int(match[2]))
    deployed = {
        logical_id: (int(props["Timeout"]), int(props["MemorySize"]))
        for logical_id, props in functions.items()
    }
    assert deployed == documented


def test_the_fargate_worker_and_its_network_are_as_documented(
    profile: tuple[dict[str, str], Synthesis],
) -> None:
    cells, synthesis = profile
    services = synthesis.resources("AWS::ECS::Service")
    cell = cells["Fargate worker"]
    nat_gateways = synthesis.resources("AWS::EC2::NatGateway")
    assert len(nat_gateways) == int(cells["NAT gateways"])
    if cell == "none":
        assert not services
        assert not synthesis.resources("AWS::ECS::TaskDefinition")
        assert not synthesis.resources("AWS::EC2::VPC")
        assert not synthesis.resources("AWS::EC2::EIP")
        return
    (service,) = services.values()
    (task,) = synthesis.resources("AWS::ECS::TaskDefinition").values()
    assert "0.5 vCPU, 1 GiB" in cell
    assert (task["Properties"]["Cpu"], task["Properties"]["Memory"]) == ("512", "1024")
    network = service["Properties"]["NetworkConfiguration"]["AwsvpcConfiguration"]
    subnets = synthesis.resources("AWS::EC2::Subnet")
    chosen = {ref["Ref"] for ref in network["Subnets"]}
    maps_public = {subnets[s]["Properties"]["MapPublicIpOnLaunch"] for s in chosen}
    if "public IP" in cell:
        assert network["AssignPublicIp"] == "ENABLED"
        assert maps_public == {True}
    else:
        assert "private subnet" in cell
        assert network["AssignPublicIp"] == "DISABLED"
        assert maps_public == {False}
        # The private subnets' default route leads to the NAT gateway, not the internet.
        routes = synthesis.resources("AWS::EC2::Route").values()
        assert any("NatGatewayId" in route["Properties"] for route in routes)


def test_the_alarms_are_as_documented(profile: tuple[dict[str, str], Synthesis]) -> None:
    cells, synthesis = profile
    alarms = list(synthesis.resources("AWS::CloudWatch::Alarm").values())
    assert len(alarms) == int(cells["CloudWatch alarms"])

    def watched(alarm: dict[str, Any]) -> list[tuple[str, str]]:
        """(namespace, metric) of a plain alarm, or of each metric its math reads."""
        props = alarm["Properties"]
        if "MetricName" in props:
            return [(props["Namespace"], props["MetricName"])]
        stats = [q["MetricStat"]["Metric"] for q in props["Metrics"] if "MetricStat" in q]
        return [(m["Namespace"], m["MetricName"]) for m in stats]

    metrics = sorted(metric for alarm in alarms for metric in watched(alarm))
    functions = _functions(synthesis)
    scheduled = [f for f in functions if f != "APIHandler"]
    assert metrics == sorted(
        [("TaskExecutor", "ExecutionsFailed"), ("TaskExecutor", "ExecutionsReclaimed")]
        + [("TaskExecutor", "EndpointsAutoPaused")]
        + [("TaskExecutor", "OldestDueLagSeconds")]
        + [("TaskExecutor", "DeliveryAttempts"), ("TaskExecutor", "DeliveryAttemptsFailed")]
        + [("TaskExecutor", "LiveWorkers"), ("TaskExecutor", "LiveSchedulers")]
        + [("AWS/Lambda", "Errors")] * len(functions)
        + [("AWS/Lambda", "Invocations")] * len(scheduled)
    )
    # What an operator pays for: one alarm metric per metric an alarm reads.
    assert len(metrics) == int(cells["CloudWatch alarm metrics"])
    # One Errors alarm per deployed function, and none for a function left out.
    alarmed = {
        d["Value"]["Ref"]
        for a in alarms
        for d in a["Properties"].get("Dimensions", [])
        if d["Name"] == "FunctionName"
    }
    assert alarmed == set(functions)
    assert all(a["Properties"]["AlarmActions"] for a in alarms)


def test_every_worker_log_group_feeds_the_failed_executions_metric(
    profile: tuple[dict[str, str], Synthesis],
) -> None:
    _, synthesis = profile
    groups = synthesis.resources("AWS::Logs::LogGroup")
    failed_filters = [
        f["Properties"]["LogGroupName"]
        for f in synthesis.resources("AWS::Logs::MetricFilter").values()
        if f["Properties"]["MetricTransformations"][0]["MetricName"] == "ExecutionsFailed"
    ]
    sources = {str(name) for name in failed_filters}
    functions = _functions(synthesis)
    if "RunWorker" in functions:
        assert any("RunWorker" in source for source in sources)
    if synthesis.resources("AWS::ECS::Service"):
        (worker_group,) = [lid for lid in groups if lid.startswith("WorkerLogs")]
        assert any(worker_group in source for source in sources)
    assert any("ReclaimStuckExecutions" in source for source in sources)
    assert len(groups) == len(functions) + len(synthesis.resources("AWS::ECS::Service"))


def test_every_scheduled_function_runs_every_minute(
    profile: tuple[dict[str, str], Synthesis],
) -> None:
    _, synthesis = profile
    for logical_id, props in _functions(synthesis).items():
        schedules = [
            event["Properties"]["Schedule"]
            for event in props.get("Events", {}).values()
            if event["Type"] == "Schedule"
        ]
        assert schedules == ([] if logical_id == "APIHandler" else ["rate(1 minute)"])


def test_full_runs_the_worker_twice_and_lean_once(
    synthesis: Synthesis, lean_synthesis: Synthesis, lean_fargate_synthesis: Synthesis
) -> None:
    def workers(s: Synthesis) -> set[str]:
        found = {"lambda"} if "RunWorker" in _functions(s) else set()
        return found | ({"fargate"} if s.resources("AWS::ECS::Service") else set())

    assert workers(synthesis) == {"lambda", "fargate"}
    assert workers(lean_synthesis) == {"lambda"}
    assert workers(lean_fargate_synthesis) == {"fargate"}


def test_the_lone_worker_lambda_stops_claiming_when_the_next_one_starts(
    lean_synthesis: Synthesis,
) -> None:
    """The worker Lambda claims until MAX_MARGIN_MS are left: with the lean budget, that is
    the minute until EventBridge's next invocation, so two never claim at once."""
    from chalicelib.worker.lambdas import MAX_MARGIN_MS

    timeout = int(_functions(lean_synthesis)["RunWorker"]["Timeout"])
    claiming_sec = timeout - min(MAX_MARGIN_MS / 1000, timeout / 2)
    assert claiming_sec == 60


def test_lean_scheduler_makes_one_pass_looking_past_the_next_minute(
    synthesis: Synthesis, lean_synthesis: Synthesis
) -> None:
    from chalicelib.scheduler.lambdas import deadline_margin

    lean = _functions(lean_synthesis)
    for logical_id in SCHEDULER_FUNCTIONS:
        timeout = int(lean[logical_id]["Timeout"])
        looping_sec = timeout - deadline_margin(timeout)
        assert looping_sec == 8  # the idle time the cost table bills
    cron_env = lean["MaterializeCronTicks"]["Environment"]["Variables"]
    promote_env = lean["PromoteDelayedExecutions"]["Environment"]["Variables"]
    lookahead_sec = float(cron_env["TE_CRON_TICK_INTERVAL_SEC"])
    assert lookahead_sec == float(promote_env["TE_PROMOTE_INTERVAL_MS"]) / 1000 == 75
    # One pass: the interval (the next iteration) lies beyond the invocation's loop time,
    # and the look-ahead covers the minute until the next invocation with room for jitter.
    assert lookahead_sec > 60 > looping_sec
    # The full profile keeps the sub-second loops for 65 s of each 70 s invocation.
    full = _functions(synthesis)
    for logical_id in SCHEDULER_FUNCTIONS:
        timeout = int(full[logical_id]["Timeout"])
        assert timeout - deadline_margin(timeout) == 65
        env = full[logical_id]["Environment"]["Variables"]
        assert "TE_CRON_TICK_INTERVAL_SEC" not in env
        assert "TE_PROMOTE_INTERVAL_MS" not in env


def test_no_lean_template_has_a_public_ip_unless_asked(
    lean_synthesis: Synthesis, lean_fargate_synthesis: Synthesis
) -> None:
    for synthesis in (lean_synthesis, lean_fargate_synthesis):
        for service in synthesis.resources("AWS::ECS::Service").values():
            network = service["Properties"]["NetworkConfiguration"]["AwsvpcConfiguration"]
            assert network["AssignPublicIp"] == "DISABLED"
        for function in _functions(synthesis).values():
            assert "VpcConfig" not in function


def test_lean_outputs_name_no_fargate_worker(lean_synthesis: Synthesis) -> None:
    outputs = lean_synthesis.template["Outputs"]
    assert "WorkerClusterName" not in outputs
    assert {"EndpointURL", "AlarmTopicArn", "DatabaseUrlSecretArn"} <= set(outputs)


def test_lean_needs_no_container_image(lean_synthesis: Synthesis) -> None:
    import json

    assets = json.loads((lean_synthesis.outdir / "dev.assets.json").read_text())
    assert not assets.get("dockerImages")


@pytest.mark.parametrize("name", ["lean_synthesis", "lean_fargate_synthesis"])
def test_cfn_lint_finds_no_errors_in_the_other_profiles(
    name: str, request: pytest.FixtureRequest
) -> None:
    import subprocess
    import sys

    from test_cdk_synth import CFN_LINT_CLI

    synthesis: Synthesis = request.getfixturevalue(name)
    result = subprocess.run(
        [sys.executable, "-c", CFN_LINT_CLI, "--format", "parseable", str(synthesis.template_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert not result.returncode & 2, result.stdout + result.stderr


def test_unknown_profile_and_worker_values_are_refused() -> None:
    import sys

    sys.path.insert(0, str(REPO_ROOT / "infra"))
    try:
        from stacks.config import DeploymentConfig
    finally:
        sys.path.remove(str(REPO_ROOT / "infra"))
    with pytest.raises(ValueError, match="profile"):
        DeploymentConfig(profile="cheap")
    with pytest.raises(ValueError, match="worker"):
        DeploymentConfig(profile="lean", worker="ec2")
    lean = DeploymentConfig(profile="lean")
    assert (lean.worker, lean.worker_public_ip, lean.scheduler_loop) == ("lambda", False, False)
    mixed = DeploymentConfig(profile="lean", worker="both", scheduler_loop=True)
    assert (mixed.fargate_worker, mixed.lambda_worker, mixed.scheduler_loop) == (True, True, True)


#: Every setting a profile overrides on some function.
OVERRIDDEN = {
    key
    for table in profiles.PROFILES.values()
    for function in table.values()
    for key in function.env
}


@pytest.mark.parametrize("name", PROFILES)
def test_each_scheduled_function_is_deployed_as_chalicelib_profiles_says(
    name: str, request: pytest.FixtureRequest
) -> None:
    """The timeouts and settings the stack deploys are the table the local stack runs."""
    synthesis: Synthesis = request.getfixturevalue(name)
    _, table = TABLES[name]
    assert set(table) == set(profiles.SCHEDULED_FUNCTIONS) == set(LOGICAL_IDS)
    functions = _functions(synthesis)
    deployed = {
        function: functions[logical_id]
        for function, logical_id in LOGICAL_IDS.items()
        if logical_id in functions
    }
    assert set(deployed) == set(table) - (
        {"run_worker"} if name == "lean_fargate_synthesis" else set()
    )
    for function, props in deployed.items():
        expected = table[function]
        env = props["Environment"]["Variables"]
        assert int(props["Timeout"]) == expected.timeout_sec, function
        assert {k: env[k] for k in OVERRIDDEN if k in env} == dict(expected.env), function


def test_the_profile_tables_are_what_the_deployment_choices_make() -> None:
    """PROFILES holds the two named shapes; the CDK's mixes come from the same builder."""
    for name, (scheduler_loop, lone_worker) in {
        "full": (True, False),
        "lean": (False, True),
    }.items():
        built = profiles.deployment_functions(
            scheduler_loop=scheduler_loop, lone_worker=lone_worker
        )
        assert built == dict(profiles.PROFILES[name])
    lean = profiles.PROFILES["lean"]
    assert lean["run_worker"].env == {
        "TE_WORKER_SCHEDULER_LOOPS": "delayed_promoter,cron_materializer"
    }
    assert all(not function.env for function in profiles.PROFILES["full"].values())


@pytest.mark.parametrize("name", PROFILES)
def test_every_process_knows_its_profile(name: str, request: pytest.FixtureRequest) -> None:
    """TE_PROFILE on every Lambda function and the Fargate worker (``GET /health`` says it)."""
    synthesis: Synthesis = request.getfixturevalue(name)
    profile, _ = TABLES[name]
    for logical_id, props in _functions(synthesis).items():
        assert props["Environment"]["Variables"]["TE_PROFILE"] == profile, logical_id
    for task in synthesis.resources("AWS::ECS::TaskDefinition").values():
        (container,) = task["Properties"]["ContainerDefinitions"]
        env = {e["Name"]: e["Value"] for e in container["Environment"]}
        assert env["TE_PROFILE"] == profile
        assert "TE_WORKER_SCHEDULER_LOOPS" not in env


def test_the_lean_worker_lambda_hosts_the_fast_scheduler_loops(lean_synthesis: Synthesis) -> None:
    """The lean worker runs the promoter and the materializer at their own (default,
    sub-second) intervals while it claims: no interval override reaches it."""
    from chalicelib.settings import WORKER_HOSTED_LOOPS, load_settings

    env = _functions(lean_synthesis)["RunWorker"]["Environment"]["Variables"]
    plain = {k: v for k, v in env.items() if isinstance(v, str)}
    settings = load_settings(plain)
    assert sorted(settings.worker_scheduler_loops.split(",")) == sorted(WORKER_HOSTED_LOOPS)
    assert "TE_CRON_TICK_INTERVAL_SEC" not in env and "TE_PROMOTE_INTERVAL_MS" not in env
    assert settings.profile == "lean"
