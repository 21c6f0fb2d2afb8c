-- 011_loop_faults: what lets no row stop a background loop, and lets anyone see a loop that
-- is down (issue 25).
--
-- schedule_error: why the cron materializer set an ACTIVE cron job aside (an expression or
-- time zone it cannot evaluate, a snapshot its tick statement refuses, a value of a type
-- it does not expect). It is written with cron_next_run_at = NULL, which takes the job out
-- of idx_jobs_cron_due for good: a batch full of such jobs can no longer starve the
-- schedulable ones behind it. GET /jobs/{id} shows it and /jobs/{id}/status reports the
-- job FAILING; replacing the job (PUT) makes a new version without it. NULL for every
-- job the materializer can schedule, so existing rows need no backfill.
ALTER TABLE jobs ADD COLUMN schedule_error TEXT;

-- job_states (006_operator_controls.sql) with schedule_error appended (a view may only
-- grow at its end).
CREATE OR REPLACE VIEW job_states AS
SELECT j.job_id, j.endpoint, j.endpoint_type, j.trigger_type,
       CASE WHEN j.trigger_type = 'CRON' THEN j.status
            WHEN e.status IN ('PENDING', 'QUEUED', 'RUNNING', 'RETRYING') THEN 'ACTIVE'
            ELSE 'RETIRED' END AS status,
       j.version, j.previous_version_id, j.replaced_by_id, j.idempotency_key, j.input,
       j.run_at, j.cron_expression, j.cron_timezone, j.cron_starts_at, j.cron_ends_at,
       j.cron_next_run_at, j.cron_last_tick_at, j.created_at,
       CASE WHEN j.trigger_type = 'CRON' THEN j.retired_at ELSE e.completed_at END AS retired_at,
       j.batch_id, j.on_success, j.on_failure, j.parent_execution_id, j.paused_at,
       j.schedule_error
FROM jobs AS j
LEFT JOIN LATERAL (
    SELECT x.status, x.completed_at
    FROM executions AS x
    WHERE x.job_id = j.job_id AND j.trigger_type <> 'CRON'
    ORDER BY x.created_at ASC
    LIMIT 1
) AS e ON true;

-- Each process writes the states of its loops into its heartbeat row's metadata every
-- beat (chalicelib/health/heartbeat.py). GET /health and GET /metrics read the rows beaten
-- in the last few seconds: a range of this index, one entry per live process, however many
-- rows a day of dead processes leaves before the housekeeper prunes them (its prune of
-- rows older than a day is a range of the same index).
CREATE INDEX idx_region_heartbeats_beat ON region_heartbeats (last_beat_at);
