"""Turns bench.json into the printed table, RESULTS.md and PNG plots (matplotlib)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def _f(value: Any, fmt: str = "{:.0f}") -> str:
    return "n/a" if value is None else fmt.format(value)


def _status(entry: Any) -> str | None:
    if isinstance(entry, dict) and entry.get("status") in ("missing", "error"):
        reason = entry.get("reason") or entry.get("error", "")
        return f"{entry['status'].upper()}: {reason.splitlines()[0][:160] if reason else ''}"
    return None


def _throughput_rows(t: dict[str, Any]) -> list[tuple[str, str, str]]:
    med, ratios = t.get("median", {}), t.get("ratios", {})
    first = t["rounds"][0] if t.get("rounds") else {}
    rows = [("pgbench TPC-B-like, 2 clients (TPS)", _f(med.get("pgbench")), "reference")]
    names = {
        "pgqueuer": "PgQueuer, 1 worker (deliveries/s)",
        "procrastinate": "Procrastinate, 1 worker (deliveries/s)",
        "ours_1w": "Task Executor, 1 worker (deliveries/s)",
        "ours_2w": "Task Executor, 2 workers (deliveries/s)",
        "ours_1w_all_slots": "Task Executor, 1 worker, all 50 slots (share 1; deliveries/s)",
        "ours_1w_crdb_config": (
            "Task Executor, 1 worker, CockroachDB's configuration (conditional_update, "
            "no NOTIFY; on PostgreSQL) (deliveries/s)"
        ),
        "ours_1w_spread": (
            f"Task Executor, 1 worker, load over {_spread(t)} endpoints (deliveries/s)"
        ),
    }
    for key, label in names.items():
        if key in ("ours_1w_spread", "ours_1w_crdb_config") and key not in first:
            continue  # optional (--spread-endpoints K), or a result from before that run
        rows.append((label, _status(first.get(key)) or _f(med.get(key)), ""))
    targets = {
        "ours_1w/pgqueuer": ">= 1.5",
        "ours_1w_all_slots/pgqueuer": "",
        "ours_1w_spread/pgqueuer": ">= 1.5",
        "ours_1w_crdb_config/pgqueuer": "",
        "ours_1w/procrastinate": ">= 6",
        "ours_1w/pgbench_tps": ">= 1.5",
        "ours_2w/pgbench_tps": "",
        "pgqueuer/pgbench_tps": "",
    }
    for key, target in targets.items():
        if key in ratios or key not in ("ours_1w_spread/pgqueuer", "ours_1w_crdb_config/pgqueuer"):
            rows.append((f"ratio {key}", _f(ratios.get(key), "{:.2f}"), target))
    return rows


def _spread(t: dict[str, Any]) -> Any:
    for r in t.get("rounds") or []:
        if isinstance(r.get("ours_1w_spread"), dict) and r["ours_1w_spread"].get("endpoints"):
            return r["ours_1w_spread"]["endpoints"]
    return "K"


PER_JOB_LABELS = {
    "pgqueuer": "PgQueuer, 1 worker",
    "ours_1w": "ours, 1 worker",
    "ours_1w_all_slots": "ours, 1 worker, all 50 slots (share 1)",
    "ours_2w": "ours, 2 workers",
    "ours_1w_crdb_config": "ours, 1 worker, CockroachDB's configuration",
    "ours_1w_spread": "ours, 1 worker, load over {} endpoints",
}


def per_job_table(t: dict[str, Any]) -> str:
    """Work per delivered job (bench/jobcost.py): each system's medians, then the medians
    of the per-round ratios to PgQueuer with the issue's targets."""
    pj = t.get("per_job") or {}
    med, ratios, targets = pj.get("median") or {}, pj.get("ratios") or {}, pj.get("targets") or {}
    if not med:
        return ""
    lines = [
        "| per delivered job | client statements (BEGIN / COMMIT / SET) | PostgreSQL CPU µs "
        "| WAL bytes | worker CPU µs | machine CPU µs (cores busy) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    # In the run's order (PgQueuer first), also when read back from bench.json (sorted keys).
    order = {key: i for i, key in enumerate(PER_JOB_LABELS)}
    for key, figures in sorted(med.items(), key=lambda kv: order.get(kv[0], len(order))):
        label = PER_JOB_LABELS.get(key, key).format(_spread(t))
        lines.append(
            f"| {label} | {_f(figures.get('statements'), '{:.3g}')} "
            f"({_f(figures.get('begin'), '{:.3g}')} / {_f(figures.get('commit'), '{:.3g}')} / "
            f"{_f(figures.get('set'), '{:.3g}')}) | {_f(figures.get('pg_cpu_us'))} | "
            f"{_f(figures.get('wal_bytes'))} | {_f(figures.get('worker_cpu_us'))} | "
            f"{_f(figures.get('machine_cpu_us'))} ({_f(figures.get('cores_busy'), '{:.2f}')}) |"
        )
    for key, figures in sorted(
        ratios.items(), key=lambda kv: order.get(kv[0].split("/")[0], len(order))
    ):
        system = key.split("/")[0]
        label = PER_JOB_LABELS.get(system, system).format(_spread(t))
        lines.append(
            f"| ratio {label} ÷ PgQueuer | {_f(figures.get('statements'), '{:.2f}')} | "
            f"{_f(figures.get('pg_cpu_us'), '{:.2f}')} | {_f(figures.get('wal_bytes'), '{:.2f}')}"
            f" | {_f(figures.get('worker_cpu_us'), '{:.2f}')} | "
            f"{_f(figures.get('machine_cpu_us'), '{:.2f}')} |"
        )
    lines.append(
        "| target, ours ÷ PgQueuer | "
        + " | ".join(
            f"<= {targets[f]:g}" if targets.get(f) is not None else ""
            for f in ("statements", "pg_cpu_us", "wal_bytes", "worker_cpu_us", "machine_cpu_us")
        )
        + " |"
    )
    return "\n".join(lines)


def cores_for_target(t: dict[str, Any], target: float = 1.5) -> str:
    """What ``target`` times PgQueuer's rate would ask of the machine at one worker's machine
    CPU per delivered job, measured in the same rounds."""
    rate = (t.get("median") or {}).get("pgqueuer")
    med = (t.get("per_job") or {}).get("median") or {}
    ours_us = (med.get("ours_1w") or {}).get("machine_cpu_us")
    pgq = med.get("pgqueuer") or {}
    if not rate or not ours_us or not pgq.get("cores_busy"):
        return ""
    return (
        f"At one worker's {ours_us:.0f} µs of machine CPU per delivered job, {target:g} times "
        f"PgQueuer's rate ({target * rate:,.0f}/s) needs {target * rate * ours_us / 1e6:.2f} "
        f"cores busy on average; PgQueuer kept {pgq['cores_busy']:.2f} busy for its own "
        f"{rate:,.0f}/s at {_f(pgq.get('machine_cpu_us'))} µs a job."
    )


def _latency_rows(lat: dict[str, Any]) -> list[tuple[str, str, str]]:
    rows = []
    for key, label in (
        ("local_stack", "local stack, in-process nudge"),
        ("separate_worker", "API + separate worker process, NOTIFY wake-up"),
        ("separate_worker_poll_only", "API + separate worker process, poll only"),
    ):
        entry = lat.get(key, {})
        value = _status(entry) or (
            f"p50 {_f(entry.get('p50_ms'), '{:.1f}')} / p95 {_f(entry.get('p95_ms'), '{:.1f}')}"
            f" / p99 {_f(entry.get('p99_ms'), '{:.1f}')} ms ({entry.get('delivered')}"
            f"/{entry.get('sent')})"
        )
        rows.append((f"latency POST /jobs -> target, {label}", value, "p50 <= 10, p99 <= 50 ms"))
    peer = lat.get("pgqueuer")
    if peer:
        value = _status(peer) or (
            f"p50 {_f(peer.get('p50_ms'), '{:.1f}')} / p95 {_f(peer.get('p95_ms'), '{:.1f}')}"
            f" / p99 {_f(peer.get('p99_ms'), '{:.1f}')} ms ({peer.get('delivered')}"
            f"/{peer.get('sent')})"
        )
        rows.append(
            ("latency, PgQueuer enqueue -> handler's request (same run)", value, "reference")
        )
        ours_, ref = lat.get("separate_worker") or {}, peer
        for q in ("p50_ms", "p99_ms"):
            if ours_.get(q) and ref.get(q):
                rows.append(
                    (
                        f"latency ratio {q[:3]}, separate worker (NOTIFY) / PgQueuer",
                        _f(ours_[q] / ref[q], "{:.2f}"),
                        "<= 1.0",
                    )
                )
    return rows


def _precision_rows(res: dict[str, Any]) -> list[tuple[str, str, str]]:
    rows = []
    d = res.get("delayed")
    if d is not None:
        rows.append(
            (
                "delayed lateness (receive - run_at)",
                _status(d)
                or (
                    f"p50 {_f(d.get('p50_ms'))} / p99 {_f(d.get('p99_ms'))}"
                    f" / max {_f(d.get('max_ms'))}"
                    f" ms ({d.get('delivered')}/{d.get('jobs')})"
                ),
                "p99 <= 400 ms",
            )
        )
    c = res.get("cron")
    if c is not None:
        o = c.get("overall", {})
        rows.append(
            (
                "cron lateness per tick",
                _status(c)
                or (
                    f"p50 {_f(o.get('p50_ms'))} / p99 {_f(o.get('p99_ms'))} ms over "
                    f"{len(c.get('ticks', []))} tick(s), {o.get('count')} fires"
                ),
                "p99 <= 1200 ms",
            )
        )
    return rows


def _creation_rows(
    a: dict[str, Any] | None, b: dict[str, Any] | None
) -> list[tuple[str, str, str]]:
    """Job creation: ours next to the peers' enqueue calls."""
    rows = []
    pgq = (b or {}).get("pgqueuer") or {}
    proc = (b or {}).get("procrastinate") or {}
    if a is not None:
        rows.append(
            (
                "POST /jobs rate: sequential / 8 clients / in-process",
                _status(a)
                or (
                    f"{_f(a.get('sequential_per_s'))} / {_f(a.get('concurrent8_per_s'))} / "
                    f"{_f(a.get('inprocess_per_s'))} per s (PgQueuer enqueue, 8 connections: "
                    f"{_f(pgq.get('single_8_clients_per_s'))} per s)"
                ),
                ">= 500 with 8 clients",
            )
        )
        rows.append(
            (
                "one job, sequential p50: POST /jobs / PgQueuer enqueue / Procrastinate defer",
                _status(a)
                or (
                    f"{_ms(a.get('sequential_p50_ms'))} / {_ms(pgq.get('single_p50_ms'))} / "
                    f"{_ms(proc.get('single_p50_ms'))} ms"
                ),
                "POST /jobs <= 3 ms",
            )
        )
    if b is not None:
        rows.append(
            (
                "batches of 1,000, 2 clients: POST /jobs/batch / PgQueuer / Procrastinate, jobs/s",
                _status(b)
                or (
                    f"{_f((b.get('ours') or {}).get('per_s'))} / {_f(pgq.get('per_s'))} / "
                    f"{_f(proc.get('per_s'))}"
                ),
                "ours >= 10,000",
            )
        )
    return rows


def _ms(value: Any) -> str:
    return "-" if value is None else f"{value:.2f}"


def _other_rows(res: dict[str, Any]) -> list[tuple[str, str, str]]:
    rows = []
    s = res.get("scale")
    if s is not None:
        if _status(s):
            rows.append(("scale", _status(s) or "", ""))
        for p in s.get("points", []):
            rows.append(
                (
                    f"scale {p['rows']:,} executions: claim / list page",
                    f"{p['claim_ms_median']:.2f} / {p['list_page_ms_median']:.2f} ms"
                    f" (pickup index: {p['uses_pickup_index']})",
                    "",
                )
            )
        if s.get("claim_growth") is not None:
            rows.append(
                ("claim time growth, largest / 10k", f"{s['claim_growth']:.2f}x", "<= 1.5x")
            )
    rows += _creation_rows(res.get("api"), res.get("batch"))
    c = res.get("coldstart")
    if c is not None:
        rows.append(
            (
                "cold import of app.py (median of 10)",
                _status(c)
                or (
                    f"{_f(c.get('import_ms_median'))} ms (interpreter+import "
                    f"{_f(c.get('process_ms_median'))} ms)"
                ),
                "<= 200 ms",
            )
        )
    p = res.get("package")
    if p is not None:
        rows.append(
            (
                "Lambda deployment.zip as deployed (slimmed; before slimming)",
                _status(p)
                or (
                    f"{_f(p.get('zip_mib'), '{:.2f}')} MiB "
                    f"({_f(p.get('zip_mib_before_slim'), '{:.2f}')} MiB)"
                ),
                "<= 8 MiB",
            )
        )
    m = res.get("memory")
    if m is not None:
        rows.append(
            (
                "worker peak RSS, 50 deliveries in flight",
                _status(m)
                or (f"{_f(m.get('peak_rss_mb'))} MB (peak in flight {m.get('peak_running')})"),
                "<= 150 MB",
            )
        )
    rows += _fairness_rows(res.get("fairness"))
    rows += _on_time_rows(res.get("on_time"))
    return rows


def _fairness_rows(f: dict[str, Any] | None) -> list[tuple[str, str, str]]:
    if f is None:
        return []
    if _status(f):
        return [("healthy lateness behind a hung endpoint", _status(f) or "", "")]
    rows = []
    for _, r in sorted(f.items()):
        lat = r["lateness"]
        rows.append(
            (
                f"healthy lateness behind a hung endpoint, {r['workers']} worker(s)",
                f"p50 {_f(lat['p50_ms'])} / p99 {_f(lat['p99_ms'])} ms "
                f"({r['received']}/{r['healthy']}; {r['hung_running']} hung RUNNING)",
                "p99 <= 1000 ms",
            )
        )
    return rows


ON_TIME_LABELS = {
    "delayed": "DELAYED, created 2-70 s ahead",
    "cron_first_after_create": "cron, first tick after creation",
    "cron_first_after_replace": "cron, first tick after PUT (replaced)",
    "cron_first_after_resume": "cron, first tick after pause + resume",
    "cron_later": "cron, every later tick",
}


def _on_time_rows(o: dict[str, Any] | None) -> list[tuple[str, str, str]]:
    """Workload 13, one row per profile: the worst category (the table below has them all)."""
    if o is None:
        return []
    if _status(o):
        return [("on time in every profile", _status(o) or "", "")]
    rows = []
    for profile, r in (o.get("profiles") or {}).items():
        w = (o.get("worst") or {}).get(profile)
        value = _status(r) or (
            f"worst category p99 {_f(w.get('p99_ms'))} / max {_f(w.get('max_ms'))} ms over "
            f"{w.get('samples')} starts; {w.get('undelivered')} undelivered, "
            f"{w.get('unexpected')} unexpected"
            if w
            else "n/a"
        )
        rows.append(
            (
                f"on time, profile {profile}: DELAYED and cron starts - their time",
                value,
                "p99, max <= 1000 ms; none undelivered",
            )
        )
    return rows


def on_time_table(o: dict[str, Any] | None) -> str:
    """Workload 13: lateness per profile and category (bench/on_time.py)."""
    profiles = (o or {}).get("profiles") or {}
    if not profiles:
        return ""
    lines = [
        "| profile | starts | samples (expected) | p50 ms | p99 ms | max ms | > 1 s "
        "| undelivered |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    notes = []
    for profile, r in profiles.items():
        if _status(r):
            lines.append(f"| {profile} | {_status(r)} | | | | | | |")
            continue
        for key, label in ON_TIME_LABELS.items():
            c = (r.get("categories") or {}).get(key) or {}
            missing = c.get("undelivered_by_status") or {}
            lines.append(
                f"| {profile} | {label} | {c.get('count')} ({c.get('expected')}) | "
                f"{_f(c.get('p50_ms'))} | {_f(c.get('p99_ms'))} | {_f(c.get('max_ms'))} | "
                f"{c.get('over_1s')} | {c.get('undelivered')}"
                + (f" ({', '.join(f'{k}: {v}' for k, v in missing.items())})" if missing else "")
                + " |"
            )
        unexpected = r.get("unexpected_ticks") or {}
        notes.append(
            f"{profile}: run {r.get('started_at')} ({r.get('duration_s')} s, load average at "
            f"start {r.get('loadavg_at_start')}), ticks {', '.join(r.get('boundaries') or [])}; "
            f"{sum(unexpected.values())} unexpected executions"
            + (f" ({', '.join(f'{k}: {v}' for k, v in unexpected.items())})" if unexpected else "")
            + f", {r.get('duplicate_ticks')} duplicate ticks, {r.get('ambiguous_ticks')} "
            f"ambiguous ticks left out, {r.get('api_errors')} API errors."
        )
    return "\n".join(lines) + "\n\n" + "\n".join(f"* {n}" for n in notes)


def _runs_note(res: dict[str, Any]) -> list[str]:
    """The workloads a later subset run (``run.py --only``) replaced: when and where."""
    out = []
    for phase, info in (res.get("runs") or {}).items():
        if info.get("started_at") == res.get("started_at"):
            continue
        m = info.get("machine") or {}
        out.append(
            f"`{phase}` is from a later run ({info.get('started_at')}, {info.get('duration_s')}"
            f" s, {m.get('nproc')} CPUs ({m.get('cpu_model')}), commit {m.get('git_commit')}"
            + (
                f" plus uncommitted changes in {', '.join(m['git_dirty'])}"
                if m.get("git_dirty")
                else ""
            )
            + f", load average at start {m.get('loadavg_at_start')})."
        )
    return out


def table(res: dict[str, Any]) -> str:
    rows: list[tuple[str, str, str]] = []
    t = res.get("throughput")
    if t is not None:
        rows += [("throughput", _status(t) or "", "")] if _status(t) else _throughput_rows(t)
    if "latency" in res:
        rows += _latency_rows(res["latency"])
    rows += _precision_rows(res) + _other_rows(res)
    lines = ["| measure | result | target |", "| --- | --- | --- |"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    return "\n".join(lines)


def render(res: dict[str, Any], out_dir: Path) -> str:
    m = res.get("machine", {})
    pg = res.get("postgres", {})
    head = [
        f"# Benchmark results ({res.get('mode')} run, {res.get('started_at')}, "
        f"{res.get('duration_s')} s)",
        "",
        f"Machine: {m.get('nproc')} CPUs ({m.get('cpu_model')}), {m.get('ram_gib')} GiB RAM, "
        f"Linux {m.get('kernel')}, Python {m.get('python')}, load average at start "
        f"{m.get('loadavg_at_start')}, commit {m.get('git_commit')}"
        + (
            f" plus uncommitted changes in {', '.join(m['git_dirty'])}"
            if m.get("git_dirty")
            else ""
        )
        + ".",
        f"PostgreSQL {pg.get('server_version')}: fsync={pg.get('fsync')}, synchronous_commit="
        f"{pg.get('synchronous_commit')}, full_page_writes={pg.get('full_page_writes')}, "
        f"shared_buffers={pg.get('shared_buffers')}.",
        f"Throughput figures are medians of {res.get('config', {}).get('rounds')} round(s) of "
        f"N={res.get('config', {}).get('n')}; ratios are medians of per-round ratios.",
        *(line for note in _runs_note(res) for line in ("", note)),
        *([""] if _runs_note(res) else []),
        "",
    ]
    body = "\n".join(head) + table(res) + "\n"
    per_job = per_job_table(res.get("throughput") or {})
    if per_job:
        body += (
            "\nWork per delivered job, same rounds (medians; ratios are medians of per-round "
            "ratios; method: bench/README.md):\n\n" + per_job + "\n"
        )
        needed = cores_for_target(res.get("throughput") or {})
        if needed:
            body += "\n" + needed + "\n"
    on_time = on_time_table(res.get("on_time"))
    if on_time:
        body += (
            "\nOn time in every profile (workload 13, `bench/on_time.py`): the local stack in "
            "each deployment profile, lateness = the sink's receive time - the execution's "
            "run_at (a cron execution's tick):\n\n" + on_time + "\n"
        )
    plots = plot(res, out_dir)
    if plots:
        body += "\n" + "\n".join(f"![{p.stem}]({p.name})" for p in plots) + "\n"
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "RESULTS.md").write_text(body, "utf-8")
    return body


def plot(res: dict[str, Any], out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    made = []
    for fn in (_plot_throughput, _plot_latency, _plot_precision, _plot_scale, _plot_on_time):
        path = fn(res, out_dir)
        if path is not None:
            made.append(path)
    return made


def _plot_throughput(res: dict[str, Any], out_dir: Path) -> Path | None:
    med = (res.get("throughput") or {}).get("median")
    if not med:
        return None
    labels = {
        "pgqueuer": "PgQueuer",
        "procrastinate": "Procrastinate",
        "ours_1w": "ours, 1 worker",
        "ours_2w": "ours, 2 workers",
    }
    names = [labels[k] for k in labels if med.get(k)]
    values = [med[k] for k in labels if med.get(k)]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.bar(names, values, color="#4477aa")
    if med.get("pgbench"):
        ax.axhline(
            med["pgbench"],
            color="#cc3311",
            linestyle="--",
            label=f"pgbench TPS ({med['pgbench']:.0f})",
        )
        ax.legend()
    ax.set_ylabel("deliveries per second")
    ax.set_title(f"Delivery throughput, N={res['throughput']['n']}, durable PostgreSQL")
    return _save(fig, out_dir / "throughput.png")


def _cdf(ax: Any, samples: list[float], label: str) -> None:
    if samples:
        ordered = sorted(samples)
        ax.plot(ordered, [(i + 1) / len(ordered) for i in range(len(ordered))], label=label)


def _plot_latency(res: dict[str, Any], out_dir: Path) -> Path | None:
    lat = res.get("latency") or {}
    # In the run's order, also when read back from bench.json (sorted keys).
    order = ("local_stack", "separate_worker", "pgqueuer", "separate_worker_poll_only")
    keys = sorted(lat, key=lambda k: order.index(k) if k in order else len(order))
    series = {k: lat[k].get("samples_ms") for k in keys if isinstance(lat[k], dict)}
    if not any(series.values()):
        return None
    fig, ax = plt.subplots(figsize=(7, 4))
    for key, samples in series.items():
        _cdf(ax, samples or [], key.replace("_", " "))
    ax.set_xscale("log")
    ax.set_xlabel("POST /jobs sent -> target received (ms)")
    ax.set_ylabel("fraction")
    ax.set_title("Latency CDF, one IMMEDIATE job every 20 ms")
    ax.legend()
    return _save(fig, out_dir / "latency.png")


def _plot_precision(res: dict[str, Any], out_dir: Path) -> Path | None:
    d = (res.get("delayed") or {}).get("samples_ms")
    c = (res.get("cron") or {}).get("samples_ms")
    if not d and not c:
        return None
    fig, ax = plt.subplots(figsize=(7, 4))
    _cdf(ax, d or [], "DELAYED (receive - run_at)")
    _cdf(ax, c or [], "CRON (receive - tick)")
    ax.set_xlabel("lateness (ms)")
    ax.set_ylabel("fraction")
    ax.set_title("Scheduling precision")
    ax.legend()
    return _save(fig, out_dir / "precision.png")


def _plot_scale(res: dict[str, Any], out_dir: Path) -> Path | None:
    points = (res.get("scale") or {}).get("points")
    if not points:
        return None
    fig, ax = plt.subplots(figsize=(7, 4))
    rows = [p["rows"] for p in points]
    ax.plot(rows, [p["claim_ms_median"] for p in points], marker="o", label="claim query")
    ax.plot(
        rows,
        [p["list_page_ms_median"] for p in points],
        marker="o",
        label="GET /jobs/{id}/executions page (in-process)",
    )
    ax.set_xscale("log")
    ax.set_xlabel("executions in table")
    ax.set_ylabel("median ms")
    ax.set_title("Scale: cost vs terminal history")
    ax.legend()
    return _save(fig, out_dir / "scale.png")


def _plot_on_time(res: dict[str, Any], out_dir: Path) -> Path | None:
    profiles = ((res.get("on_time") or {}).get("profiles")) or {}
    shown = {p: r for p, r in profiles.items() if isinstance(r, dict) and r.get("samples_ms")}
    if not shown:
        return None
    fig, axes = plt.subplots(1, len(shown), figsize=(6 * len(shown), 4), squeeze=False)
    for ax, (profile, r) in zip(axes[0], shown.items(), strict=True):
        for i, (key, label) in enumerate(ON_TIME_LABELS.items()):
            samples = sorted(r["samples_ms"].get(key) or [])
            if not samples:
                label += " (no samples)"
            ys = [(j + 1) / len(samples) for j in range(len(samples))]
            ax.plot(samples, ys, label=label, color=f"C{i}")  # one colour per category
        ax.axvline(1000, color="#cc3311", linestyle="--", linewidth=1)
        ax.set_xlabel("lateness (ms)")
        ax.set_ylabel("fraction")
        ax.set_title(f"On time, profile {profile}")
        ax.legend(fontsize=7)
    return _save(fig, out_dir / "on_time.png")


def _save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
