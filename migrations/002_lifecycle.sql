-- 002_lifecycle: soft deletion, the two definitions of "live" work, and retention support.
--
-- Soft deletion (the reference task server's pattern): a deleted payload spec, config or
-- endpoint keeps its row with deleted_at set, so history that names it (jobs through
-- fk_jobs_endpoint, deleted endpoints through fk_endpoints_config/_payload_spec, endpoint
-- snapshots) stays valid and readable; every live read filters deleted_at IS NULL, and
-- registering the name again revives the row with the new definition. Secrets are deleted
-- for real: history names them only inside snapshot text, and a deleted credential must
-- not survive in the database.

ALTER TABLE payload_specs ADD COLUMN deleted_at TIMESTAMPTZ;

ALTER TABLE configs ADD COLUMN deleted_at TIMESTAMPTZ;

ALTER TABLE endpoints ADD COLUMN deleted_at TIMESTAMPTZ;

-- live_jobs: the jobs whose endpoint snapshot may still be used by a delivery, i.e. what
-- a delete must not break: ACTIVE cron jobs (they tick again) and every job with an
-- execution that is not terminal (a retired cron job's in-flight ticks included). Each arm
-- walks a partial index whose predicate it repeats exactly (idx_jobs_cron_due,
-- idx_executions_pickup, idx_executions_pending, idx_executions_running), so the view
-- costs what is live, never what is history.
CREATE VIEW live_jobs AS
SELECT j.job_id, j.endpoint, j.endpoint_snapshot, j.created_at
FROM jobs AS j
WHERE j.job_id IN (
    SELECT job_id FROM jobs WHERE trigger_type = 'CRON' AND status = 'ACTIVE'
    UNION ALL
    SELECT job_id FROM executions WHERE status IN ('QUEUED', 'RETRYING')
    UNION ALL
    SELECT job_id FROM executions WHERE status = 'PENDING'
    UNION ALL
    SELECT job_id FROM executions WHERE status = 'RUNNING'
);

-- job_states: jobs as the API shows them. A cron job's status is stored (cancel, PUT and
-- the materializer at ends_at retire it). A one-shot job's status is its execution's, read
-- here: ACTIVE while the execution is PENDING/QUEUED/RUNNING/RETRYING, RETIRED once it is
-- terminal, with retired_at = the execution's completed_at. Derived rather than written
-- because the write would sit on the worker's hot path: retiring the job in the finalize
-- statement is a non-HOT update of a jobs row (heap tuple plus five index entries) for
-- every delivery, about a quarter more database writes per delivery, while this read costs
-- one index probe (idx_executions_by_job) per job shown. The job and its execution can
-- therefore never disagree. The LATERAL probe is gated on the trigger, so a cron job's
-- executions are never scanned.
CREATE VIEW job_states AS
SELECT j.job_id, j.endpoint, j.endpoint_type, j.trigger_type,
       CASE WHEN j.trigger_type = 'CRON' THEN j.status
            WHEN e.status IN ('PENDING', 'QUEUED', 'RUNNING', 'RETRYING') THEN 'ACTIVE'
            ELSE 'RETIRED' END AS status,
       j.version, j.previous_version_id, j.replaced_by_id, j.idempotency_key, j.input,
       j.run_at, j.cron_expression, j.cron_timezone, j.cron_starts_at, j.cron_ends_at,
       j.cron_next_run_at, j.cron_last_tick_at, j.created_at,
       CASE WHEN j.trigger_type = 'CRON' THEN j.retired_at ELSE e.completed_at END AS retired_at
FROM jobs AS j
LEFT JOIN LATERAL (
    SELECT x.status, x.completed_at
    FROM executions AS x
    WHERE x.job_id = j.job_id AND j.trigger_type <> 'CRON'
    ORDER BY x.created_at ASC
    LIMIT 1
) AS e ON true;

-- The retention purge walks cron jobs to reach their old executions through
-- idx_executions_by_job. Partial: one-shot job inserts never touch it.
CREATE INDEX idx_jobs_cron ON jobs (job_id) WHERE trigger_type = 'CRON';

-- Cron jobs that reached ends_at under the previous rule stayed ACTIVE with no next run and
-- left the due scan for good. Their next run becomes ends_at, the materializer's
-- retirement tick: its next pass retires them like any other ended schedule.
UPDATE jobs SET cron_next_run_at = cron_ends_at
WHERE trigger_type = 'CRON' AND status = 'ACTIVE' AND cron_next_run_at IS NULL
  AND cron_ends_at IS NOT NULL;
