-- What GET /metrics reads (chalicelib/services/metrics.py). Every statement reads either
-- the live work (partial indexes that hold only non-terminal rows, so the cost follows
-- the backlog, never history) or a bounded time window (:since, one index range), so a
-- scrape costs the same with a year of history as with a day.

-- name: metrics_health_ping
-- GET /health: the database answers a trivial statement on a pooled connection.
SELECT 1 AS ok

-- name: metrics_loop_states
-- The heartbeats of the processes alive lately (rows beaten since :since, a few beats ago;
-- DEAD rows are graceful stops): each carries its loops' states in metadata.loop_states
-- (chalicelib/health/heartbeat.py). GET /health answers 503 LOOP_DOWN when one reports a
-- loop down, and GET /metrics shows te_loop_up per process and loop. A range of
-- idx_region_heartbeats_beat (migration 011), newest first: one row per live process,
-- whatever a day of dead processes leaves before the housekeeper prunes them. The LIMIT
-- keeps a load balancer's probe bounded whatever the fleet.
SELECT component, metadata
FROM region_heartbeats
WHERE last_beat_at >= CAST(:since AS TIMESTAMPTZ)
  AND status <> 'DEAD'
ORDER BY last_beat_at DESC
LIMIT 500

-- name: metrics_queue_depth
-- Non-terminal executions by status and endpoint. One branch per status group, each
-- shaped as a partial index's predicate (idx_executions_pending, idx_executions_pickup,
-- idx_executions_running), so no branch reads a terminal row.
SELECT status, endpoint, count(*) AS n
FROM (
    SELECT status, endpoint FROM executions WHERE status = 'PENDING'
    UNION ALL
    SELECT status, endpoint FROM executions WHERE status IN ('QUEUED', 'RETRYING')
    UNION ALL
    SELECT status, endpoint FROM executions WHERE status = 'RUNNING'
) AS live
GROUP BY status, endpoint
ORDER BY status, endpoint

-- name: metrics_oldest_due
-- The run_at of the oldest execution that is due and not yet running: claimable (QUEUED,
-- RETRYING, on idx_executions_due in run_at order) or due but not yet promoted (PENDING,
-- on idx_executions_pending). Each min() is the first entry of its index range.
SELECT min(oldest) AS oldest_run_at
FROM (
    SELECT min(run_at) AS oldest FROM executions
    WHERE status IN ('QUEUED', 'RETRYING') AND run_at <= CAST(:now AS TIMESTAMPTZ)
    UNION ALL
    SELECT min(run_at) AS oldest FROM executions
    WHERE status = 'PENDING' AND run_at <= CAST(:now AS TIMESTAMPTZ)
) AS due

-- name: metrics_finished_since
-- Executions that reached a terminal status since :since, by status: one range of
-- idx_executions_completed (only terminal rows have completed_at).
SELECT status, count(*) AS n
FROM executions
WHERE completed_at IS NOT NULL AND completed_at >= CAST(:since AS TIMESTAMPTZ)
GROUP BY status
ORDER BY status

-- name: metrics_attempt_durations
-- Quantiles of the durations of attempts finished since :since (a range of
-- idx_attempts_completed). percentile_cont with one fraction each: the form both
-- PostgreSQL and CockroachDB accept.
SELECT count(*) AS n,
       coalesce(sum(duration_ms), 0) AS total_ms,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY CAST(duration_ms AS FLOAT8)) AS p50,
       percentile_cont(0.9) WITHIN GROUP (ORDER BY CAST(duration_ms AS FLOAT8)) AS p90,
       percentile_cont(0.99) WITHIN GROUP (ORDER BY CAST(duration_ms AS FLOAT8)) AS p99
FROM attempts
WHERE completed_at IS NOT NULL
  AND completed_at >= CAST(:since AS TIMESTAMPTZ)
  AND duration_ms IS NOT NULL

-- name: metrics_events_since
-- Cron ticks materialized and executions reclaimed since :since, summed over every
-- scheduler's rows: one range of the primary key per event.
SELECT event, coalesce(sum(amount), 0) AS n
FROM metric_events
WHERE event IN ('cron_ticks_materialized', 'reclaimed')
  AND recorded_at >= CAST(:since AS TIMESTAMPTZ)
GROUP BY event
ORDER BY event

-- name: metrics_record_event
-- Written by the materializer and the reclaimer inside the transaction that did the work
-- (one row per iteration that did something), so the row commits exactly with the work.
INSERT INTO metric_events (event, recorded_at, amount)
VALUES (:event, CAST(:now AS TIMESTAMPTZ), :amount)
