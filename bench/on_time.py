"""Workload 13: on time in every profile.

The local stack (``python -m chalicelib.local --profile full|lean``) on a fresh database of
the harness's PostgreSQL, delivering to the nginx sink. In one run per profile:

* **DELAYED** jobs created 2 to 70 s ahead of their ``run_at`` (the leads spread evenly
  over that range, in shuffled order, the creations spread over the run);
* **cron** jobs ``* * * * *`` (UTC), created at times spread over the ~55 s before a minute
  boundary B1, so their first tick is B1; later a group of them is **replaced**
  (``PUT /jobs/{id}`` with a new expression: the minutes from the action boundary to the
  last one) and another **paused then resumed** (``POST /jobs/{id}/pause``, 3 s later
  ``/resume``), each a few seconds to ~50 s before a later boundary.

Lateness = the sink's receive time ($msec, the first receipt of an execution id) - the
execution's ``run_at`` (for a cron execution, its tick). Categories: ``delayed``,
``cron_first_after_create``, ``cron_first_after_replace``, ``cron_first_after_resume``
(each version's or resume's first tick) and ``cron_later`` (every other tick). Expected
ticks come from what the harness did and when (a boundary after the request was sent, up
to the last boundary), not from the service's answer: a tick that never got an execution
counts as undelivered (``no execution``), an execution at a tick nobody asked for (a
retired version's, a paused job's) as unexpected. A boundary that falls between a
request's send and its answer is ambiguous and left out (counted).

Target: every category's p99 and max <= 1 s, nothing undelivered, nothing unexpected.
"""

from __future__ import annotations

import math
import os
import random
import subprocess
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import ours
from common import PROJECT_PY, ROOT, free_port, percentile, progress, summary_ms
from ours import Api, Procs
from pgserver import PgServer
from sink import Sink

PROFILES = ("full", "lean")
CATEGORIES = (
    "delayed",
    "cron_first_after_create",
    "cron_first_after_replace",
    "cron_first_after_resume",
    "cron_later",
)
TARGET_MS = 1000.0

#: Samples per category: full >= 60 each (later ticks: 240), quick ~10-30.
FULL = {
    "delayed": 100,  # DELAYED jobs, leads 2..70 s
    "keep": 0,  # cron jobs left alone
    "replace": 60,  # cron jobs replaced before boundary `act`
    "resume": 60,  # cron jobs paused and resumed before boundary `act`
    "boundaries": 4,  # B1 (first ticks) .. B4
    "act": 3,  # replace / pause+resume in the ~50 s before B3
    "min_lead_s": 57,  # B1 is at least this far after the stack is ready
}
QUICK = {
    "delayed": 30,
    "keep": 10,
    "replace": 10,
    "resume": 10,
    "boundaries": 2,
    "act": 2,
    "min_lead_s": 25,
}
LEAD_MIN_S, LEAD_MAX_S = 2.0, 70.0
#: After the last boundary, wait up to this long for what is still missing (lean before the
#: worker Lambda hosted the fast loops started work up to a minute late: late, not lost).
GRACE_S = 65.0
PAUSE_BEFORE_RESUME_S = 3.0
#: Statuses of an execution the sink will never see (nothing to wait for).
FINAL = ("CANCELLED", "FAILED")


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _hms(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%H:%M:%S")


def profile_supported(profile: str) -> bool:
    """Whether ``python -m chalicelib.local`` takes ``--profile`` (full works without)."""
    proc = subprocess.run(
        [str(PROJECT_PY), "-m", "chalicelib.local", "--help"],
        cwd=ROOT,
        env=ours.project_env("postgresql://unused@/x"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return "--profile" in proc.stdout and profile in proc.stdout


def start_stack(procs: Procs, url: str, profile: str, with_flag: bool) -> Api:
    """The local stack in ``profile``'s shape on a free loopback port; waits for the API."""
    port = free_port()
    args = [str(PROJECT_PY), "-m", "chalicelib.local"]
    if with_flag:
        args += ["--profile", profile]
    procs.start(
        f"local-{profile}",
        args,
        ours.project_env(
            url, TE_LISTEN_ADDR=f"127.0.0.1:{port}", TE_LOCAL_MODE="true", TE_PROFILE=profile
        ),
    )
    api = Api(port)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        procs.check_alive()
        try:
            status, _ = api.call("GET", "/openapi.json")
            if status == 200:
                return api
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"the local stack ({profile}) did not answer GET /openapi.json")


class _Clients:
    """One keep-alive API client per thread."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.local = threading.local()

    def get(self) -> Api:
        if not hasattr(self.local, "api"):
            self.local.api = Api(self.port)
        return self.local.api


class _Run:
    """What one profile's run did, and when (wall clock, seconds)."""

    def __init__(self, port: int) -> None:
        self.clients = _Clients(port)
        self.lock = threading.Lock()
        #: execution id -> run_at of each DELAYED job created, with its lead
        self.delayed: dict[str, dict[str, float]] = {}
        #: cron slot -> versions: {job_id, kind, sent, done, retired_sent, retired_done,
        #: pauses: [(pause_sent, pause_done, resume_sent, resume_done)]}
        self.slots: dict[int, list[dict[str, Any]]] = {}
        self.errors: list[str] = []

    def call(self, method: str, path: str, body: Any = None) -> tuple[float, float, Any]:
        sent = time.time()
        status, reply = self.clients.get().call(method, path, body)
        done = time.time()
        if status not in (200, 201):
            raise RuntimeError(f"{method} {path} answered {status}: {reply}")
        return sent, done, reply

    def guard(self, label: str, fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                fn()
            except Exception as exc:
                with self.lock:
                    self.errors.append(f"{label}: {str(exc)[:300]}")

        return run

    def create_delayed(self, i: int, planned: float, lead: float) -> None:
        run_at = round(planned + lead, 3)
        sent, _, reply = self.call(
            "POST",
            "/jobs",
            {
                "endpoint": ours.ENDPOINT,
                "trigger": "DELAYED",
                "idempotency_key": f"ot-d-{i}",
                "run_at": _iso(run_at),
                "input": {"n": i},
            },
        )
        with self.lock:
            self.delayed[reply["execution"]["execution_id"]] = {
                "run_at": run_at,
                "lead_s": run_at - sent,
            }

    def create_cron(self, slot: int) -> None:
        sent, done, reply = self.call(
            "POST",
            "/jobs",
            {
                "endpoint": ours.ENDPOINT,
                "trigger": "CRON",
                "cron": "* * * * *",
                "timezone": "UTC",
                "input": {"n": slot},
            },
        )
        version = {"job_id": reply["job_id"], "kind": "create", "sent": sent, "done": done}
        with self.lock:
            self.slots[slot] = [{**version, "pauses": []}]

    def replace(self, slot: int, expression: str) -> None:
        current = self.slots[slot][-1]
        sent, done, reply = self.call("PUT", f"/jobs/{current['job_id']}", {"cron": expression})
        with self.lock:
            current["retired_sent"], current["retired_done"] = sent, done
            self.slots[slot].append(
                {
                    "job_id": reply["job_id"],
                    "kind": "replace",
                    "sent": sent,
                    "done": done,
                    "pauses": [],
                }
            )

    def pause_resume(self, slot: int, resume_at: float) -> None:
        current = self.slots[slot][-1]
        p_sent, p_done, _ = self.call("POST", f"/jobs/{current['job_id']}/pause")
        time.sleep(max(0.0, resume_at - time.time()))
        r_sent, r_done, _ = self.call("POST", f"/jobs/{current['job_id']}/resume")
        with self.lock:
            current["pauses"].append((p_sent, p_done, r_sent, r_done))


def _plan(cfg: dict[str, Any], ready: float) -> dict[str, Any]:
    """Boundaries and the time of every action (wall clock)."""
    b1 = math.ceil((ready + cfg["min_lead_s"]) / 60) * 60
    bounds = [float(b1 + 60 * k) for k in range(cfg["boundaries"])]
    groups = ["replace"] * cfg["replace"] + ["resume"] * cfg["resume"] + ["keep"] * cfg["keep"]
    # Interleave the groups over the creation window (slot s, group by rank within group).
    sizes = {g: groups.count(g) for g in set(groups)}
    seen: dict[str, int] = {}
    ranked = []
    for g in groups:
        seen[g] = seen.get(g, 0) + 1
        ranked.append(((seen[g] - 0.5) / sizes[g], g))
    order = [g for _, g in sorted(ranked)]
    start = max(ready + 1.0, b1 - 55.0)
    end = b1 - 2.0
    jobs = len(order)
    cron_at = [start + (end - start) * i / max(1, jobs - 1) for i in range(jobs)]
    act = bounds[cfg["act"] - 1]
    acting = [s for s, g in enumerate(order) if g in ("replace", "resume")]
    act_start, act_end = act - 50.0, act - 3.0
    act_at = {
        s: act_start + (act_end - act_start) * i / max(1, len(acting) - 1)
        for i, s in enumerate(acting)
    }
    # DELAYED: leads 2..70 s evenly, in shuffled order; creations spread so the last is due
    # well before the last boundary.
    n = cfg["delayed"]
    leads = [LEAD_MIN_S + (LEAD_MAX_S - LEAD_MIN_S) * j / max(1, n - 1) for j in range(n)]
    random.Random(13).shuffle(leads)
    window = max(5.0, bounds[-1] - LEAD_MAX_S - 5.0 - (ready + 1.0))
    delayed_at = [ready + 1.0 + window * i / max(1, n - 1) for i in range(n)]
    minutes = sorted({int(b // 60) % 60 for b in bounds[cfg["act"] - 1 :]})
    return {
        "bounds": bounds,
        "groups": order,
        "cron_at": cron_at,
        "act_at": act_at,
        "delayed_at": delayed_at,
        "leads": leads,
        "replace_expression": ",".join(str(m) for m in minutes) + " * * * *",
    }


def _actions(run: _Run, plan: dict[str, Any]) -> list[tuple[float, str, Callable[[], None]]]:
    """(time, label, function) of every API call, sorted by time."""
    acts: list[tuple[float, str, Callable[[], None]]] = []
    for i, (at, lead) in enumerate(zip(plan["delayed_at"], plan["leads"], strict=True)):
        acts.append(
            (at, "delayed", run.guard(f"delayed {i}", _bind(run.create_delayed, i, at, lead)))
        )
    for slot, at in enumerate(plan["cron_at"]):
        acts.append((at, "cron", run.guard(f"cron {slot}", _bind(run.create_cron, slot))))
    for slot, at in plan["act_at"].items():
        if plan["groups"][slot] == "replace":
            fn = _bind(run.replace, slot, plan["replace_expression"])
            acts.append((at, "replace", run.guard(f"replace {slot}", fn)))
        else:
            fn = _bind(run.pause_resume, slot, at)
            acts.append((at - PAUSE_BEFORE_RESUME_S, "pause", run.guard(f"pause {slot}", fn)))
    return sorted(acts, key=lambda a: a[0])


def _bind(fn: Callable[..., None], *args: Any) -> Callable[[], None]:
    return lambda: fn(*args)


def _drive(
    acts: list[tuple[float, str, Callable[[], None]]], plan: dict[str, Any], profile: str
) -> None:
    """Submit each action at its time (16 client threads, so a slow answer delays nothing
    else); one progress line per phase."""
    bounds = plan["bounds"]
    marks = [
        (b + 0.5, f"  on_time [{profile}]: tick {k + 1}/{len(bounds)} ({_hms(b)})")
        for k, b in enumerate(bounds)
    ]
    act_start = min(plan["act_at"].values(), default=None)
    if act_start is not None:
        marks.append(
            (
                act_start - PAUSE_BEFORE_RESUME_S - 0.1,
                f"  on_time [{profile}]: replacing and pausing/resuming cron jobs until "
                f"{_hms(max(plan['act_at'].values()))}",
            )
        )
    marks.sort()
    with ThreadPoolExecutor(16) as pool:
        futures = []
        for at, _, fn in acts:
            while marks and marks[0][0] <= at:
                _sleep_until(marks[0][0])
                progress(marks.pop(0)[1])
            _sleep_until(at)
            futures.append(pool.submit(fn))
        for f in futures:
            f.result()
    for at, line in marks:
        _sleep_until(at)
        progress(line)


def _sleep_until(at: float) -> None:
    delay = at - time.time()
    if delay > 0:
        time.sleep(delay)


def _expected(
    run: _Run, bounds: list[float]
) -> tuple[dict[tuple[str, int], str], set[tuple[str, int]]]:
    """(job id, tick) -> category of every tick the harness's actions call for, and the
    ambiguous ones (a boundary between a request's send and its answer)."""
    expected: dict[tuple[str, int], str] = {}
    ambiguous: set[tuple[str, int]] = set()
    for versions in run.slots.values():
        for v in versions:
            retired = (v.get("retired_sent", math.inf), v.get("retired_done", math.inf))
            uncertain = [(v["sent"], v["done"]), retired]
            for p_sent, p_done, r_sent, r_done in v["pauses"]:
                uncertain += [(p_sent, p_done), (r_sent, r_done)]
            for b in bounds:
                if b <= v["sent"] or b > retired[1]:
                    continue  # before the version existed, after it was retired
                if any(s < b <= d for s, d in uncertain):
                    ambiguous.add((v["job_id"], int(b)))
                    continue
                if any(p < b <= r for p, _, r, _ in v["pauses"]):
                    continue  # paused at the tick: skipped (no catch_up)
                # The last thing done to the job before this tick, and whether an earlier
                # boundary came after it (then this tick is a later one; an ambiguous one
                # does not count: the service may have seen the request after it).
                event, kind = v["sent"], v["kind"]
                for _, _, r_sent, _ in v["pauses"]:
                    if event < r_sent < b:
                        event, kind = r_sent, "resume"
                first = not any(
                    event < other < b and (v["job_id"], int(other)) not in ambiguous
                    for other in bounds
                )
                expected[(v["job_id"], int(b))] = (
                    f"cron_first_after_{kind}" if first else "cron_later"
                )
    return expected, ambiguous


def _collect(
    server: PgServer, db: str, sink: Sink, mark: int, run: _Run, bounds: list[float]
) -> dict[str, Any]:
    """Wait for every expected delivery (up to GRACE_S after the last tick), then join the
    sink's receipts with the executions' run_at."""
    expected, ambiguous = _expected(run, bounds)
    job_ids = {v["job_id"] for versions in run.slots.values() for v in versions}
    deadline = bounds[-1] + GRACE_S
    _sleep_until(bounds[-1] + 3.0)
    while True:
        received: dict[str, float] = {}
        for ts, ident in sink.read_since(mark):
            if ident not in received or ts < received[ident]:
                received[ident] = ts
        with server.connect(db) as conn:
            rows = conn.execute(
                "SELECT execution_id::text, job_id::text, extract(epoch FROM run_at)::float8,"
                " status FROM executions"
            ).fetchall()
        execs = {eid: (jid, float(at), status) for eid, jid, at, status in rows}
        by_tick: dict[tuple[str, int], list[str]] = {}
        for eid, (jid, at, _) in execs.items():
            if jid in job_ids:
                by_tick.setdefault((jid, round(at)), []).append(eid)
        # Still to come: a tick without an execution yet, or whose execution may still be
        # delivered (a CANCELLED or FAILED one never will).
        waiting = [
            k
            for k in expected
            if not any(e in received for e in by_tick.get(k, []))
            and not (by_tick.get(k) and all(execs[e][2] in FINAL for e in by_tick[k]))
        ]
        waiting += [
            e
            for e in run.delayed
            if e not in received and execs.get(e, ("", 0, ""))[2] not in FINAL
        ]
        if not waiting or time.time() > deadline:
            break
        time.sleep(2.0)
    return _classify(run, expected, ambiguous, received, execs, by_tick, bounds)


def _classify(
    run: _Run,
    expected: dict[tuple[str, int], str],
    ambiguous: set[tuple[str, int]],
    received: dict[str, float],
    execs: dict[str, tuple[str, float, str]],
    by_tick: dict[tuple[str, int], list[str]],
    bounds: list[float],
) -> dict[str, Any]:
    samples: dict[str, list[float]] = {c: [] for c in CATEGORIES}
    undelivered: dict[str, dict[str, int]] = {c: {} for c in CATEGORIES}
    wanted: dict[str, int] = dict.fromkeys(CATEGORIES, 0)

    def missed(category: str, why: str) -> None:
        undelivered[category][why] = undelivered[category].get(why, 0) + 1

    for eid in run.delayed:
        wanted["delayed"] += 1
        if eid in received:
            samples["delayed"].append(
                received[eid] - execs[eid][1]
                if eid in execs
                else received[eid] - run.delayed[eid]["run_at"]
            )
        else:
            missed("delayed", execs[eid][2] if eid in execs else "no execution")
    duplicates = 0
    for key, category in expected.items():
        wanted[category] += 1
        live = [e for e in by_tick.get(key, []) if execs[e][2] != "CANCELLED"]
        duplicates += max(0, len(live) - 1)
        got = [received[e] - execs[e][1] for e in by_tick.get(key, []) if e in received]
        if got:
            samples[category].append(min(got))
        elif by_tick.get(key):
            missed(category, execs[by_tick[key][0]][2])
        else:
            missed(category, "no execution")
    unexpected: dict[str, int] = {}
    for key, eids in by_tick.items():
        if key in expected or key in ambiguous or key[1] > bounds[-1]:
            continue
        for e in eids:
            status = "delivered" if e in received else execs[e][2]
            if status != "CANCELLED":
                unexpected[status] = unexpected.get(status, 0) + 1
    categories = {}
    for c in CATEGORIES:
        ms = [x * 1000 for x in samples[c]]
        categories[c] = {
            **summary_ms(samples[c]),
            "min_ms": min(ms) if ms else None,
            "over_1s": sum(1 for x in ms if x > TARGET_MS),
            "expected": wanted[c],
            "undelivered": sum(undelivered[c].values()),
            "undelivered_by_status": undelivered[c],
        }
    return {
        "categories": categories,
        "unexpected_ticks": unexpected,
        "duplicate_ticks": duplicates,
        "ambiguous_ticks": len(ambiguous),
        "samples_ms": {c: [round(x * 1000, 1) for x in samples[c]] for c in CATEGORIES},
    }


def run_profile(server: PgServer, sink: Sink, profile: str, cfg: dict[str, Any]) -> dict[str, Any]:
    """One profile's run: the stack, the plan, the deliveries, the lateness per category."""
    with_flag = profile_supported(profile)
    if not with_flag and profile != "full":
        raise ours.Missing(f"`python -m chalicelib.local` has no --profile {profile} yet")
    db = f"bench_on_time_{profile}"
    url = ours.prepare_db(server, db)
    started = time.time()
    load = [round(x, 2) for x in os.getloadavg()]
    procs = Procs()
    health: Any = None
    try:
        api = start_stack(procs, url, profile, with_flag)
        ours.create_endpoint(api, sink.url)
        _, health = api.call("GET", "/health")
        mark = sink.mark()
        ready = time.time()
        plan = _plan(cfg, ready)
        bounds = plan["bounds"]
        run = _Run(api.port)
        progress(
            f"  on_time [{profile}]: stack up in {ready - started:.1f}s; {cfg['delayed']} DELAYED "
            f"jobs over {plan['delayed_at'][-1] - ready:.0f}s, {len(plan['groups'])} cron jobs "
            f"{_hms(plan['cron_at'][0])}-{_hms(plan['cron_at'][-1])}, first tick {_hms(bounds[0])}"
            f", last {_hms(bounds[-1])}"
        )
        _drive(_actions(run, plan), plan, profile)
        procs.check_alive()
        progress(f"  on_time [{profile}]: collecting deliveries (up to {GRACE_S:.0f}s more)")
        out = _collect(server, db, sink, mark, run, bounds)
        procs.check_alive()
    finally:
        procs.stop()
    out.update(
        profile=profile,
        profile_flag=with_flag,
        health_at_start=health if isinstance(health, dict) else None,
        started_at=_iso(started),
        loadavg_at_start=load,
        duration_s=round(time.time() - started, 1),
        boundaries=[_iso(b) for b in bounds],
        replace_expression=plan["replace_expression"],
        cron_jobs={g: plan["groups"].count(g) for g in ("keep", "replace", "resume")},
        delayed_jobs=cfg["delayed"],
        api_errors=len(run.errors),
        api_error_examples=run.errors[:5],
    )
    cats = out["categories"]
    progress(
        f"on_time [{profile}]: "
        + "; ".join(
            f"{c.replace('cron_', '')} p50 {_f(cats[c]['p50_ms'])} / p99 {_f(cats[c]['p99_ms'])}"
            f" / max {_f(cats[c]['max_ms'])} ms ({cats[c]['count']}/{cats[c]['expected']})"
            for c in CATEGORIES
        )
        + f"; unexpected {sum(out['unexpected_ticks'].values())}, API errors {len(run.errors)}"
    )
    return out


def _f(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f}"


def on_time(
    server: PgServer,
    sink: Sink,
    cfg: dict[str, Any],
    guarded: Callable[[str, Callable[[], Any]], Any],
    profiles: tuple[str, ...] = PROFILES,
) -> dict[str, Any]:
    """Workload 13 for each profile (a failure of one is recorded, the other still runs)."""
    results = {
        p: guarded(f"on_time, profile {p}", lambda p=p: run_profile(server, sink, p, cfg))
        for p in profiles
    }
    return {"config": cfg, "target_ms": TARGET_MS, "profiles": results, "worst": _worst(results)}


def _worst(results: dict[str, Any]) -> dict[str, Any]:
    """Per profile: the largest p99 and max over the categories, what was not delivered."""
    out = {}
    for p, r in results.items():
        cats = (r or {}).get("categories") if isinstance(r, dict) else None
        if not cats:
            continue
        out[p] = {
            "p99_ms": max((c["p99_ms"] or 0) for c in cats.values()),
            "max_ms": max((c["max_ms"] or 0) for c in cats.values()),
            "undelivered": sum(c["undelivered"] for c in cats.values()),
            "unexpected": sum(r["unexpected_ticks"].values()),
            "samples": sum(c["count"] for c in cats.values()),
            "p99_all_ms": percentile([x for s in r["samples_ms"].values() for x in s], 99),
        }
    return out
