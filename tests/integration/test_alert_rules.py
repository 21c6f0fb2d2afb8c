"""The shipped Prometheus alert rules (docs/alerts/prometheus-rules.yml), run by promtool on
what GET /metrics answers while real deliveries fail and succeed.

Everything runs on loopback: the API through chalice's test client on the real database, a
real worker delivering to a loopback HTTP target (500 on one endpoint, 200 on another), a
real loop group with a loop that keeps failing. /metrics is scraped after each round of
deliveries; scrape *i* becomes minute *i* of a ``promtool test rules`` input (each sample as
Prometheus's own parser reads it, ``_`` where a series is missing, and ``up`` 1 or 0 by
the answer's status, as a Prometheus server records a scrape), and promtool's
``alert_rule_test`` states which alerts fire at which minute, with exactly which labels
and annotations. ``make promtool`` puts promtool into the venv (``make test`` does first).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from chalicelib.db.connection import Database
from chalicelib.wiring.worker import build_worker
from chalicelib.worker import Worker
from tests.integration.test_loop_health import COMPONENT, Running, reported_down
from tests.integration.test_loop_health import failing_scheduler as failing_scheduler
from tests.integration.worker.test_callbacks import register
from tests.support.api_client import ApiClient
from tests.support.seed.worker import BOX
from tests.support.served import HttpTarget, Reply, free_port
from tests.support.worker_runs import settings, settle

REPO_ROOT = Path(__file__).resolve().parents[2]
RULES = REPO_ROOT / "docs" / "alerts" / "prometheus-rules.yml"
#: The labels a Prometheus server adds to every sample of the scrape (its job and target).
TARGET = {"job": "task-executor", "instance": "api"}
TARGET_SORTED = tuple(sorted(TARGET.items()))
RETRY_TWICE = {"max_attempts": 2, "backoff": "fixed", "initial_delay_ms": 0}

Key = tuple[str, tuple[tuple[str, str], ...]]


def promtool() -> str:
    """promtool from PATH, else the one ``make promtool`` put beside the venv's python."""
    found = shutil.which("promtool") or str(Path(sys.executable).parent / "promtool")
    assert Path(found).is_file(), "promtool is missing: run `make promtool`"
    return found


class Recording:
    """Successive scrapes of /metrics, one per minute of the promtool test."""

    def __init__(self) -> None:
        self.scrapes: list[dict[Key, float]] = []
        self.up: list[int] = []

    def scrape(self, api: ApiClient) -> dict[Key, float]:
        reply = api.get("/metrics")
        samples: dict[Key, float] = {}
        if reply.status == 200:
            for family in text_string_to_metric_families(reply.body):
                for sample in family.samples:
                    labels = {**sample.labels, **TARGET}
                    samples[(sample.name, tuple(sorted(labels.items())))] = sample.value
        self.scrapes.append(samples)
        self.up.append(1 if reply.status == 200 else 0)
        return samples

    def input_series(self) -> list[dict[str, str]]:
        """promtool's input_series: every series seen, its value at each minute or ``_``."""
        keys = list(dict.fromkeys(key for scrape in self.scrapes for key in scrape))
        series = [
            {
                "series": _selector(name, dict(labels)),
                "values": " ".join(_value(scrape.get((name, labels))) for scrape in self.scrapes),
            }
            for name, labels in keys
        ]
        up = {"series": _selector("up", TARGET), "values": " ".join(map(str, self.up))}
        return [*series, up]


def _selector(name: str, labels: dict[str, str]) -> str:
    inner = ",".join(f"{k}={_quoted(v)}" for k, v in sorted(labels.items()))
    return f"{name}{{{inner}}}"


def _quoted(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def _value(value: float | None) -> str:
    if value is None:
        return "_"
    return "NaN" if value != value else repr(float(value))


def _rules() -> dict[str, dict[str, Any]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return {rule["alert"]: rule for group in groups for rule in group["rules"]}


def alert(name: str, **labels: str) -> dict[str, Any]:
    """One expected alert: its labels, the rule's own, and its annotations as rendered."""
    rule = _rules()[name]

    def render(text: str) -> str:
        text = re.sub(r"\{\{\s*\$labels\.(\w+)\s*\}\}", lambda m: labels[m[1]], text)
        assert "{{" not in text, f"{name}: a template this test cannot render: {text}"
        return text

    return {
        "exp_labels": {**labels, **rule.get("labels", {})},
        "exp_annotations": {k: render(v) for k, v in rule.get("annotations", {}).items()},
    }


Checks = list[tuple[str, str, list[dict[str, Any]]]]


def promtool_test(tmp_path: Path, recording: Recording, checks: Checks) -> tuple[bool, str]:
    """Run ``promtool test rules`` over the recording; ``checks``: (minute, alert, expected
    firing alerts). Returns (passed, promtool's output)."""
    test = {
        "rule_files": [str(RULES)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": recording.input_series(),
                "alert_rule_test": [
                    {"eval_time": at, "alertname": name, "exp_alerts": expected}
                    for at, name, expected in checks
                ],
            }
        ],
    }
    path = tmp_path / f"alert-test-{len(list(tmp_path.iterdir()))}.yml"
    path.write_text(yaml.safe_dump(test, sort_keys=False))
    done = subprocess.run(
        [promtool(), "test", "rules", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return done.returncode == 0, done.stdout + done.stderr


def job(api: ApiClient, endpoint: str, key: str) -> str:
    body = {"endpoint": endpoint, "trigger": "IMMEDIATE", "idempotency_key": key, "input": {}}
    reply = api.post("/jobs", body)
    assert reply.status == 201, reply.body
    return str(reply.body["execution"]["execution_id"])


@pytest.fixture
def worker(database: Database) -> Iterator[Worker]:
    built = build_worker(db=database, settings=settings(), secret_box=lambda: BOX, rand=lambda: 0.5)
    yield built
    built.stop()
    built.drain(5)
    built.close()


def test_the_rules_file_is_valid_for_promtool() -> None:
    done = subprocess.run(
        [promtool(), "check", "rules", str(RULES)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert set(_rules()) >= {
        "TaskExecutorQueueLag",
        "TaskExecutorDeliveryFailureRate",
        "TaskExecutorDeadLetters",
        "TaskExecutorLoopDown",
    }


def test_failing_deliveries_fire_the_failure_rate_and_dead_letter_alerts_not_lag(
    api: ApiClient,
    database: Database,
    worker: Worker,
    http_target: HttpTarget,
    failing_scheduler: Running,
    tmp_path: Path,
) -> None:
    """Minutes 1-8: each minute 3 executions to a target answering 500 (two attempts each,
    then a dead letter) and 3 to one answering 200; minutes 9-20: nothing."""
    register(api, http_target, "broken", retry_policy=RETRY_TWICE)
    register(api, http_target, "healthy")
    http_target.script("/broken", Reply(500, body="down"))
    http_target.script("/healthy", Reply(200, body="{}"))
    from tests.support.waiting import wait_for

    wait_for(lambda: reported_down(database), "the heartbeat to report the loop down", timeout=30)
    recording = Recording()
    recording.scrape(api)
    for minute in range(1, 9):
        ids = [job(api, "broken", f"b{minute}.{n}") for n in range(3)]
        ids += [job(api, "healthy", f"h{minute}.{n}") for n in range(3)]
        assert settle(worker, database, ids) == {"FAILED": 3, "SUCCESS": 3}
        recording.scrape(api)
    for _ in range(9, 21):
        recording.scrape(api)
    assert recording.up == [1] * 21

    # What the rules read: real counters, as delivered.
    last = recording.scrapes[8]

    def value(name: str, **labels: str) -> float:
        return last[(name, tuple(sorted({**labels, **TARGET}.items())))]

    assert value("te_delivery_attempts_total", endpoint="broken", outcome="FAILED") == 48
    assert value("te_delivery_attempts_total", endpoint="healthy", outcome="SUCCESS") == 24
    failed = "te_delivery_attempts_failed_total"
    assert value(failed, endpoint="broken", error_type="HTTP_ERROR") == 48  # the 500s
    assert not any(n == failed and ("endpoint", "healthy") in labels for n, labels in last)
    assert value("te_executions_ended_total", endpoint="broken", status="FAILED") == 24
    assert not any(name.startswith("te_executions_ended") for name, _ in recording.scrapes[0])

    rate = "TaskExecutorDeliveryFailureRate"
    dead = "TaskExecutorDeadLetters"
    lag = "TaskExecutorQueueLag"
    loop_down = alert("TaskExecutorLoopDown", component=COMPONENT, loop="doomed")
    checks: Checks = [
        # The first dead letters of an endpoint: a counter that was not there before.
        ("1m", dead, [alert(dead, endpoint="broken")]),
        ("1m", rate, []),
        ("1m", "TaskExecutorLoopDown", []),  # down, but for less than 2 minutes
        ("3m", rate, []),  # failing, but for less than 5 minutes
        ("3m", "TaskExecutorLoopDown", [loop_down]),
        ("8m", rate, [alert(rate, endpoint="broken")]),
        ("8m", dead, [alert(dead, endpoint="broken")]),
        *[(f"{m}m", lag, []) for m in (1, 8, 20)],
        ("8m", "TaskExecutorScrapeFailing", []),
        # Twelve quiet minutes later: no attempts, no new dead letter for over 10 minutes.
        ("20m", rate, []),
        ("20m", dead, []),
    ]
    passed, output = promtool_test(tmp_path, recording, checks)
    assert passed, output
    # The same recording with a wrong expectation fails: promtool does check.
    wrong = [("8m", rate, [alert(rate, endpoint="broken"), alert(rate, endpoint="healthy")])]
    passed, output = promtool_test(tmp_path, recording, wrong)
    assert not passed and 'endpoint="healthy"' in output, output


def test_lag_fires_for_due_work_that_waits_not_for_a_paused_endpoint_and_scrapes_fail(
    api: ApiClient,
    database: Database,
    http_target: HttpTarget,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """No worker runs: 'late' and 'held' (paused) each have a due execution, 'idle' none.
    The service's clock moves a minute per scrape (minutes 0-9); then the API loses its
    database and /metrics answers 503 (minutes 10-16)."""
    for name in ("late", "held", "idle"):
        register(api, http_target, name)
    job(api, "late", "l1")
    job(api, "held", "h1")
    assert api.post("/endpoints/held/pause", {}).status == 200
    start = datetime.now(UTC)
    minutes = [0]
    clock: Callable[[], datetime] = lambda: start + timedelta(minutes=minutes[0])  # noqa: E731
    monkeypatch.setattr(api.app.context.process, "clock", clock)
    recording = Recording()
    for minute in range(10):
        minutes[0] = minute
        found = recording.scrape(api)
        lag_of_late = found[("te_endpoint_lag_seconds", (("endpoint", "late"), *TARGET_SORTED))]
        assert minute * 60 <= lag_of_late < minute * 60 + 30
        assert found[("te_endpoint_lag_seconds", (("endpoint", "idle"), *TARGET_SORTED))] == 0
        assert ("te_endpoint_lag_seconds", (("endpoint", "held"), *TARGET_SORTED)) not in found

    monkeypatch.setenv("TE_DATABASE_URL", f"postgresql://te@127.0.0.1:{free_port()}/te")
    api.restart()
    monkeypatch.setattr(api.app.context.process, "clock", clock)
    for _ in range(10, 17):
        assert recording.scrape(api) == {}
    assert recording.up == [1] * 10 + [0] * 7

    lag = "TaskExecutorQueueLag"
    scrape = "TaskExecutorScrapeFailing"
    checks: Checks = [
        ("5m", lag, []),  # over 120 s since minute 3, but not yet for 5 minutes
        ("8m", lag, [alert(lag, endpoint="late")]),
        ("9m", lag, [alert(lag, endpoint="late")]),
        ("9m", scrape, []),
        ("14m", scrape, []),  # failing since minute 10, for less than 5 minutes
        ("16m", scrape, [alert(scrape, **TARGET)]),
        ("9m", "TaskExecutorDeliveryFailureRate", []),
        ("9m", "TaskExecutorDeadLetters", []),
    ]
    passed, output = promtool_test(tmp_path, recording, checks)
    assert passed, output


AUTO_PAUSE_CASES = Path(__file__).parents[1] / "alerts" / "auto-pause-rules.test.yml"


def _promtool_test_file(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [promtool(), "test", "rules", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_an_automatic_pause_fires_its_alert_on_a_sample(tmp_path: Path) -> None:
    """tests/alerts/auto-pause-rules.test.yml: the counter going from 0 to 1 fires
    TaskExecutorEndpointAutoPaused for that endpoint and reason at once, for 15 minutes;
    an endpoint first scraped already paused fires too; the others stay quiet."""
    done = _promtool_test_file(AUTO_PAUSE_CASES)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "TaskExecutorEndpointAutoPaused" in _rules()

    # The same cases expecting no alert where one fires fail: promtool does check.
    cases = yaml.safe_load(AUTO_PAUSE_CASES.read_text())
    cases["rule_files"] = [str(RULES)]
    cases["tests"][0]["alert_rule_test"][1]["exp_alerts"] = []
    wrong = tmp_path / "wrong.test.yml"
    wrong.write_text(yaml.safe_dump(cases))
    assert _promtool_test_file(wrong).returncode != 0
