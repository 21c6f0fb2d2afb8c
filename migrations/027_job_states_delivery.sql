-- 027_job_states_delivery: a job's own delivery settings are shown with it.
--
-- job_states (011_loop_faults.sql) with jobs.delivery_overrides appended (a view may only
-- grow at its end), so GET /jobs, GET /jobs/{id}, a job's versions and a batch's jobs show
-- the retry_policy, timeout_ms, url and expire_after that POST /jobs set for the job (POST
-- /jobs answers them from what it wrote). A job's headers stay out of it: the API never shows them.
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
       j.schedule_error, j.delivery_overrides
FROM jobs AS j
LEFT JOIN LATERAL (
    SELECT x.status, x.completed_at
    FROM executions AS x
    WHERE x.job_id = j.job_id AND j.trigger_type <> 'CRON'
    ORDER BY x.created_at ASC
    LIMIT 1
) AS e ON true;
