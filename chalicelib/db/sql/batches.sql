-- Batches (POST /jobs/batch): the batch row, its progress and its cancel. A batch row is
-- written once; progress is counted on idx_executions_batch (migrations/005_batches.sql)
-- rather than kept in counters that every finalize would update: on CockroachDB one row
-- written by every finalize of a batch is a contention hot spot.

-- name: batches_insert
-- Written once, in the creating transaction, after its jobs (total = the jobs it created).
INSERT INTO batches (batch_id, total, on_complete)
VALUES (:batch_id, :total, CAST(:on_complete AS TEXT))
RETURNING batch_id, total, on_complete, created_at

-- name: batches_get
-- The batch row: what it was created with. Its progress is batches_progress.
SELECT batch_id, total, on_complete, created_at FROM batches WHERE batch_id = :batch_id

-- name: batches_progress
-- Counts of the batch's executions by status, and the latest end among them, from the
-- partial index idx_executions_batch (batch_id, status): one range of the index per batch,
-- whatever else the table holds, and no row that the delivery path has to keep up to date.
SELECT status, count(*) AS n, max(completed_at) AS last_completed_at
FROM executions
WHERE batch_id = :batch_id
GROUP BY status

-- name: batches_jobs_page
-- GET /batches/{id}/jobs: the batch's jobs on idx_jobs_batch, keyset on (created_at,
-- job_id) descending like jobs_list. The status filter is the one-shot job's execution
-- status (a batch's jobs are mostly one-shot; a CRON job matches on any of its ticks).
SELECT j.*
FROM job_states AS j
WHERE j.batch_id = :batch_id
  AND (CAST(:status AS TEXT) IS NULL OR EXISTS (
        SELECT 1 FROM executions AS x WHERE x.job_id = j.job_id AND x.status = :status))
  AND (CAST(:after_ts AS TIMESTAMPTZ) IS NULL
       OR (j.created_at, j.job_id) < (:after_ts, :after_id))
ORDER BY j.created_at DESC, j.job_id DESC
LIMIT :limit_plus_one

-- name: batches_cancel
-- POST /batches/{id}/cancel: every cancellable child execution (the transition table's
-- sources of CANCELLED, :sources) CANCELLED with its log line, in one statement, and the
-- batch's ACTIVE cron jobs retired. The status guard is executions_cancel's: a child a
-- worker claimed first stays RUNNING and finishes; nothing terminal is overwritten.
WITH moved AS (
    UPDATE executions
    SET status = 'CANCELLED', completed_at = now(), worker_id = NULL
    WHERE batch_id = :batch_id AND status = ANY(CAST(:sources AS TEXT[]))
    RETURNING execution_id, attempt_count, ordering_key, concurrency_key
), logged AS (
    INSERT INTO execution_logs (execution_id, attempt_number, level, message)
    SELECT execution_id, attempt_count, 'INFO', :message FROM moved
    RETURNING log_id
), retired AS (
    UPDATE jobs
    SET status = 'RETIRED', retired_at = now()
    WHERE batch_id = :batch_id AND trigger_type = 'CRON' AND status = 'ACTIVE'
    RETURNING job_id
)
SELECT (SELECT count(*) FROM moved) AS cancelled, (SELECT count(*) FROM retired) AS retired,
       ARRAY(SELECT execution_id FROM moved
             WHERE ordering_key IS NOT NULL OR concurrency_key IS NOT NULL) AS keyed

-- name: batches_lock_for_completion
-- Before deciding whether a batch just completed, its row is locked (FOR UPDATE: a lock,
-- not a write; only batches with on_complete, only by transactions that ended one of its
-- children). Two workers finalizing the last two children concurrently would otherwise
-- each see the other's child still RUNNING and neither would fire on_complete. With the
-- lock taken after the child's update and the check run as the next statement (a fresh
-- snapshot under READ COMMITTED), the second to lock sees the first's committed update.
-- Ordered by batch_id so two finalize batches lock in the same order (no deadlock).
SELECT batch_id, total, on_complete, created_at
FROM batches
WHERE batch_id = ANY(CAST(:batch_ids AS TEXT[])) AND on_complete IS NOT NULL
ORDER BY batch_id
FOR UPDATE
