"""The process and due-lag alerts of docs/alerts/prometheus-rules.yml, on a real stack with
a process killed, and the hand-written cases of tests/alerts/process-rules.test.yml.

The stack: the API in process (chalice's test client on the test database, as
test_alert_rules.py runs it), a scheduler (``python -m chalicelib.scheduler``) and a worker
(``python -m chalicelib.worker``) as subprocesses on the same database. Once /metrics shows
both live, a DELAYED job due in 3 s is created (and, in the scheduler's case, a cron job)
and one process is killed with SIGKILL: no final heartbeat, no drain, what a crash or an
OOM kill does. /metrics is scraped every :data:`INTERVAL_SEC` until the killed kind reads 0
and the lag has grown with the clock (tests/support/promtext.py lays the scrapes on that
grid and continues them as the stack would go on); promtool then states at which
evaluation each rule starts firing, to the interval: the process rule 2 minutes after the
first 0, the lag rule 5 minutes after the lag passed 120 s, and not one interval before.
``GET /health`` answers 503 ``PROCESS_DOWN`` naming the kind meanwhile.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_alert_rules import RULES, alert
from tests.support.api_client import ApiClient
from tests.support.factories import register_endpoint
from tests.support.promtext import (
    Check,
    Key,
    Recording,
    Timeline,
    alert_rules,
    duration_sec,
    key,
    parse,
    promtool,
    run_rule_test,
)
from tests.support.served import die_with_parent
from tests.support.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
STATIC_CASES = ROOT / "tests" / "alerts" / "process-rules.test.yml"
#: The labels a Prometheus server adds to every sample of the scrape.
TARGET = {"job": "task-executor", "instance": "api"}
#: One scrape (and one rule evaluation) every 5 s: the kill reads 0 within 15 s, so a few.
INTERVAL_SEC = 5.0
#: A process killed must read 0 within this (heartbeat interval plus grace: about 15 s).
DOWN_WITHIN_SEC = 60.0
LAGS = ("te_oldest_due_lag_seconds", "te_endpoint_lag_seconds")
SCHEDULER_DOWN = "TaskExecutorSchedulerDown"
WORKER_DOWN = "TaskExecutorWorkerDown"
DUE_LAG = "TaskExecutorOldestDueLag"
QUEUE_LAG = "TaskExecutorQueueLag"
QUIET_THROUGHOUT = ("TaskExecutorLivenessUnknown", "TaskExecutorScrapeFailing")


@dataclass
class Processes:
    """The scheduler and worker subprocesses of one test; each is stopped at the end."""

    env: dict[str, str]
    log_dir: Path
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def start(self, role: str) -> None:
        with (self.log_dir / f"{role}.log").open("wb") as log:
            self.procs[role] = subprocess.Popen(
                [sys.executable, "-m", f"chalicelib.{role}"],
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=die_with_parent,  # SIGKILL to it if this test process dies
            )

    def kill(self, role: str) -> None:
        """SIGKILL to that one process, by its pid: nothing it can do, not even a last beat."""
        proc = self.procs.pop(role)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)

    def logs(self) -> str:
        return "\n".join(
            f"--- {path.name}\n{path.read_text(errors='replace')[-3000:]}"
            for path in sorted(self.log_dir.glob("*.log"))
        )

    def close(self) -> None:
        for proc in self.procs.values():
            proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)


@pytest.fixture
def processes(app_env: dict[str, str], tmp_path: Path) -> Iterator[Processes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TE_")}
    env.update(app_env, TE_WORKER_POLL_INTERVAL_MS="50", TE_LOG_FORMAT="json")
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    running = Processes(env, log_dir)
    yield running
    running.close()


def live(api: ApiClient) -> dict[str, float]:
    """te_live_processes by kind, as /metrics answers now."""
    reply = api.get("/metrics")
    assert reply.status == 200, reply.body
    return {
        dict(labels)["kind"]: value
        for (name, labels), value in parse(reply.body, {}).items()
        if name == "te_live_processes"
    }


def start_stack(api: ApiClient, processes: Processes) -> None:
    processes.start("scheduler")
    processes.start("worker")
    try:
        wait_for(
            lambda: live(api),
            "/metrics to show a live scheduler and worker",
            until=lambda kinds: kinds.get("scheduler") == 1 and kinds.get("worker") == 1,
            timeout=30,
        )
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{processes.logs()}") from exc


def delayed_job(api: ApiClient, due_in_sec: float) -> tuple[str, datetime]:
    """A DELAYED job on endpoint 'late'; its id and run_at."""
    run_at = datetime.now(UTC) + timedelta(seconds=due_in_sec)
    body = {
        "endpoint": "late",
        "trigger": "DELAYED",
        "run_at": run_at.isoformat().replace("+00:00", "Z"),
        "idempotency_key": "delayed-1",
        "input": {},
    }
    reply = api.post("/jobs", body)
    assert reply.status == 201, reply.body
    return str(reply.body["job_id"]), run_at


def cron_job(api: ApiClient) -> tuple[str, datetime]:
    """A cron job ticking every minute on 'late'; its id and first tick."""
    body = {"endpoint": "late", "trigger": "CRON", "cron": "* * * * *", "timezone": "UTC"}
    reply = api.post("/jobs", body)
    assert reply.status == 201, reply.body
    tick = datetime.fromisoformat(reply.body["next_run_at"].replace("Z", "+00:00"))
    return str(reply.body["job_id"]), tick


def statuses(api: ApiClient, job_id: str) -> list[str]:
    reply = api.get(f"/jobs/{job_id}/executions")
    assert reply.status == 200, reply.body
    return [str(e["status"]) for e in reply.body["items"]]


def fetch(api: ApiClient) -> tuple[int, str]:
    reply = api.get("/metrics")
    return reply.status, reply.body if isinstance(reply.body, str) else ""


def gauge(recording: Recording, name: str, **labels: str) -> list[float | None]:
    """One series in every capture so far (None where a scrape lacked it)."""
    series = key(name, **labels, **TARGET)
    return [c.samples.get(series) for c in recording.captures]


def scrape_until_down_and_late(
    api: ApiClient,
    recording: Recording,
    kind: str,
    killed_at: float,
    also: Callable[[], bool] | None = None,
) -> None:
    """Scrape every interval until ``kind`` read 0 in two scrapes and the lag grew in two
    (and ``also()`` holds); the 0 must come within :data:`DOWN_WITHIN_SEC` of the kill."""

    def done() -> bool:
        down = [v == 0 for v in gauge(recording, "te_live_processes", kind=kind)]
        lags = [v for v in gauge(recording, "te_oldest_due_lag_seconds") if v]
        return sum(down) >= 2 and len(lags) >= 2 and (also is None or also())

    while not done():
        recording.scrape(lambda: fetch(api))
        readings = gauge(recording, "te_live_processes", kind=kind)
        if 0 not in readings:
            waited = time.monotonic() - killed_at
            assert waited <= DOWN_WITHIN_SEC, f"{kind} still live {waited:.0f} s after the kill"
        assert len(recording.captures) < 40, "the stack never settled: " + str(readings)


def assert_lag_grows_with_the_clock(recording: Recording) -> None:
    """The captured lag, once above 0, gained what the clock did between scrapes (the
    continuation of promtext.Timeline assumes just that)."""
    lag = key(LAGS[0], **TARGET)
    rows = [(c.slot, c.samples[lag]) for c in recording.captures if c.samples.get(lag)]
    (first_slot, first), (last_slot, last) = rows[0], rows[-1]
    elapsed = (last_slot - first_slot) * INTERVAL_SEC
    assert elapsed > 0 and abs((last - first) - elapsed) < 2.0, rows


def seconds(value: float) -> str:
    return f"{round(value)}s"


def for_sec(alertname: str) -> float:
    return duration_sec(str(alert_rules(RULES)[alertname]["for"]))


def fires_at(
    timeline: Timeline, series: Key, holds: Callable[[float], bool], alertname: str
) -> float:
    """When ``alertname`` must start firing: its ``for`` after the first slot where
    ``series`` satisfies ``holds``."""
    slot = timeline.first_slot(series, holds)
    assert slot is not None, f"{series} never satisfies the rule's condition"
    return timeline.at(slot) + for_sec(alertname)


def firing_from(at: float, name: str, expected: list[dict[str, Any]]) -> list[Check]:
    """Not firing one evaluation before ``at``, firing at ``at``."""
    return [(seconds(at - INTERVAL_SEC), name, []), (seconds(at), name, expected)]


def continued(recording: Recording) -> Timeline:
    """The captures, continued until the lag rule has had time to fire: the last captured
    lag aged to 120 s, then the rule's ``for``, then two evaluations more."""
    last = recording.captures[-1]
    lag = last.samples[key(LAGS[0], **TARGET)]
    end = last.slot * INTERVAL_SEC + (120 - lag) + for_sec(DUE_LAG) + 2 * INTERVAL_SEC
    return recording.timeline(until_sec=end, ageing=LAGS)


def promtool_test(path: Path) -> tuple[bool, str]:
    done = subprocess.run(
        [promtool(), "test", "rules", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return done.returncode == 0, done.stdout + done.stderr


def assert_promtool_agrees(tmp_path: Path, timeline: Timeline, checks: list[Check]) -> None:
    passed, output = run_rule_test(tmp_path / "captured.test.yml", RULES, timeline, checks)
    assert passed, output
    # promtool does check: the first firing expected one evaluation earlier fails.
    at, name, expected = next(c for c in checks if c[2])
    early = [(seconds(duration_sec(at) - INTERVAL_SEC), name, expected)]
    passed, output = run_rule_test(tmp_path / "early.test.yml", RULES, timeline, early)
    assert not passed and name in output, output


def test_a_killed_scheduler_reads_0_fires_scheduler_down_then_the_due_lag(
    api: ApiClient, processes: Processes, tmp_path: Path
) -> None:
    start_stack(api, processes)
    register_endpoint(api, "late")
    # A cron tick due at least 5 s after the kill: the materializer, which looks one
    # interval (1 s) ahead, must not have queued it before.
    next_minute = datetime.now(UTC).replace(second=0, microsecond=0) + timedelta(minutes=1)
    if next_minute - datetime.now(UTC) < timedelta(seconds=5):
        time.sleep((next_minute - datetime.now(UTC)).total_seconds() + 0.1)

    recording = Recording(INTERVAL_SEC, TARGET)
    recording.scrape(lambda: fetch(api))  # slot 0: both live, nothing due
    delayed, run_at = delayed_job(api, due_in_sec=3)
    cron, tick = cron_job(api)
    processes.kill("scheduler")
    killed_at = time.monotonic()
    scrape_until_down_and_late(
        api,
        recording,
        "scheduler",
        killed_at,
        also=lambda: datetime.now(UTC) > tick + timedelta(seconds=INTERVAL_SEC),
    )

    # What the stack says: the scheduler is gone, the worker is not, due work waits.
    assert gauge(recording, "te_live_processes", kind="scheduler")[0] == 1
    assert set(gauge(recording, "te_live_processes", kind="worker")) == {1}
    assert_lag_grows_with_the_clock(recording)
    reply = api.get("/health", auth=False)
    assert (reply.status, reply.error_code) == (503, "PROCESS_DOWN"), reply.body
    assert reply.body["error"]["kinds"] == ["scheduler"]
    assert statuses(api, delayed) == ["PENDING"]  # never promoted
    assert statuses(api, cron) == []  # its tick never materialized
    # The cron tick alone is lag too: with the DELAYED run cancelled, it is the oldest.
    assert api.post(f"/jobs/{delayed}/cancel").status == 200
    before = datetime.now(UTC)
    [alone] = [v for k, v in parse(fetch(api)[1], {}).items() if k[0] == LAGS[0]]
    after = datetime.now(UTC)
    assert (before - tick).total_seconds() - 0.5 <= alone <= (after - tick).total_seconds() + 0.5
    assert (before - run_at).total_seconds() > alone  # the DELAYED run was the older

    # What the rules make of it.
    scheduler = key("te_live_processes", kind="scheduler", **TARGET)
    lag = key(LAGS[0], **TARGET)
    timeline = continued(recording)
    down_fires = fires_at(timeline, scheduler, lambda v: v == 0, SCHEDULER_DOWN)
    lag_fires = fires_at(timeline, lag, lambda v: v > 120, DUE_LAG)
    last = seconds(timeline.at(timeline.slots - 1))
    checks: list[Check] = [
        ("0s", SCHEDULER_DOWN, []),
        *firing_from(down_fires, SCHEDULER_DOWN, [alert(SCHEDULER_DOWN, kind="scheduler")]),
        *firing_from(lag_fires, DUE_LAG, [alert(DUE_LAG)]),
        (last, WORKER_DOWN, []),
        # Nothing is QUEUED, so the per-endpoint lag never sees this: the reason for DUE_LAG.
        (last, QUEUE_LAG, []),
        *[(last, name, []) for name in QUIET_THROUGHOUT],
    ]
    assert_promtool_agrees(tmp_path, timeline, checks)


def test_a_killed_worker_reads_0_fires_worker_down_then_both_lag_rules(
    api: ApiClient, processes: Processes, tmp_path: Path
) -> None:
    start_stack(api, processes)
    register_endpoint(api, "late")
    recording = Recording(INTERVAL_SEC, TARGET)
    recording.scrape(lambda: fetch(api))  # slot 0: both live, nothing due
    delayed, _ = delayed_job(api, due_in_sec=3)
    processes.kill("worker")
    scrape_until_down_and_late(api, recording, "worker", time.monotonic())

    assert gauge(recording, "te_live_processes", kind="worker")[0] == 1
    assert set(gauge(recording, "te_live_processes", kind="scheduler")) == {1}
    assert_lag_grows_with_the_clock(recording)
    reply = api.get("/health", auth=False)
    assert (reply.status, reply.error_code) == (503, "PROCESS_DOWN"), reply.body
    assert reply.body["error"]["kinds"] == ["worker"]
    assert statuses(api, delayed) == ["QUEUED"]  # promoted by the scheduler, never claimed

    worker = key("te_live_processes", kind="worker", **TARGET)
    lag = key(LAGS[0], **TARGET)
    endpoint_lag = key(LAGS[1], endpoint="late", **TARGET)
    timeline = continued(recording)
    down_fires = fires_at(timeline, worker, lambda v: v == 0, WORKER_DOWN)
    lag_fires = fires_at(timeline, lag, lambda v: v > 120, DUE_LAG)
    queue_fires = fires_at(timeline, endpoint_lag, lambda v: v > 120, QUEUE_LAG)
    last = seconds(timeline.at(timeline.slots - 1))
    checks: list[Check] = [
        ("0s", WORKER_DOWN, []),
        *firing_from(down_fires, WORKER_DOWN, [alert(WORKER_DOWN, kind="worker")]),
        *firing_from(lag_fires, DUE_LAG, [alert(DUE_LAG)]),
        *firing_from(queue_fires, QUEUE_LAG, [alert(QUEUE_LAG, endpoint="late")]),
        (last, SCHEDULER_DOWN, []),
        *[(last, name, []) for name in QUIET_THROUGHOUT],
    ]
    assert_promtool_agrees(tmp_path, timeline, checks)


def test_the_hand_written_cases_pass_and_would_catch_a_changed_rule(tmp_path: Path) -> None:
    """tests/alerts/process-rules.test.yml passes on the shipped rules, and fails on a copy
    whose process rules wait 1 minute instead of 2."""
    passed, output = promtool_test(STATIC_CASES)
    assert passed, output
    covered = {SCHEDULER_DOWN, WORKER_DOWN, DUE_LAG, "TaskExecutorLivenessUnknown"}
    assert covered <= set(alert_rules(RULES))

    changed = tmp_path / "docs" / "alerts" / "prometheus-rules.yml"
    changed.parent.mkdir(parents=True)
    text = RULES.read_text()
    assert text.count("for: 2m") >= 2
    changed.write_text(text.replace("for: 2m", "for: 1m"))
    cases = tmp_path / "tests" / "alerts" / STATIC_CASES.name
    cases.parent.mkdir(parents=True)
    cases.write_text(STATIC_CASES.read_text())
    passed, output = promtool_test(cases)
    assert not passed and SCHEDULER_DOWN in output, output
