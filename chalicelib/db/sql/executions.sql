-- name: executions_get
-- endpoint_version: which definition of its endpoint the execution is delivered with (NULL,
-- its job's snapshot, until a retry asks for the current one: migration 025).
-- ordering_wait: it waits behind its ordering key's head, outside the claim order.
SELECT execution_id, job_id, endpoint, endpoint_type, status, input, output, attempt_count,
       max_attempts, run_at, started_at, completed_at, duration_ms, created_at,
       COALESCE(endpoint_version, 'snapshot') AS endpoint_version, ordering_wait
FROM executions
WHERE execution_id = :execution_id

-- name: executions_status
-- The current status only: what a refused transition reports, and what long-polling reads.
SELECT status FROM executions WHERE execution_id = :execution_id

-- name: executions_queue_position
-- 1-based place in the claim order (run_at ASC among due QUEUED/RETRYING rows), counted on
-- idx_executions_due (run_at, execution_id), in its order: the row comparison bounds the
-- range at this execution, and at most :max_ahead rows of it are counted (the ORDER BY
-- keeps the planner on the index, where a bare LIMIT lets it hope a sequential scan meets
-- them first), so the answer costs a bounded read however long the backlog; a position of
-- :max_ahead + 1 means "at least that far".
-- execution_id breaks run_at ties so positions are distinct; the claim itself does not
-- promise an order among equal run_at values. Parked rows (a paused or held endpoint's,
-- migration 018) are not ahead of anyone: the claim does not read them.
SELECT count(*) + 1 AS position
FROM (
    SELECT 1
    FROM executions
    WHERE status IN ('QUEUED', 'RETRYING')
      AND NOT parked
      AND NOT ordering_wait
      AND run_at <= now()
      AND (run_at, execution_id) < (:run_at, :execution_id)
    ORDER BY run_at ASC, execution_id ASC
    LIMIT :max_ahead
) AS ahead

-- name: executions_cancel
-- The CANCELLED transition and its log line in one statement. The WHERE guard lists the
-- statuses the transition table allows as sources (:sources = sources_of(CANCELLED)), so a
-- worker that claimed the row first wins and this changes 0 rows: never RUNNING ->
-- CANCELLED, never a terminal status overwritten. batch_id: a batch child's cancel may be
-- its batch's last end (on_complete, chalicelib/services/callbacks.py); ordering_key,
-- concurrency_key: a keyed cancel (ordering or gated concurrency key) settles its key
-- (chalicelib/services/keys.py). operations_cancel_page writes the same transition and
-- log line for a page (the two change together).
WITH moved AS (
    UPDATE executions
    SET status = 'CANCELLED', completed_at = now(), worker_id = NULL
    WHERE execution_id = :execution_id AND status = ANY(CAST(:sources AS TEXT[]))
    RETURNING execution_id, attempt_count, batch_id, ordering_key, concurrency_key
), logged AS (
    INSERT INTO execution_logs (execution_id, attempt_number, level, message)
    SELECT execution_id, attempt_count, 'INFO', :message FROM moved
    RETURNING log_id
)
SELECT execution_id, batch_id, ordering_key, concurrency_key FROM moved

-- name: executions_one_shot_of_job
-- A one-shot job has exactly one execution (created with the job).
SELECT execution_id FROM executions WHERE job_id = :job_id
ORDER BY created_at ASC, execution_id ASC
LIMIT 1

-- name: executions_list_for_job
-- GET /jobs/{id}/executions: a keyset page on (created_at, execution_id) descending over
-- idx_executions_by_job (job_id, created_at DESC). Tagged lines ("-- if <param>") are
-- kept only when the parameter is given (chalicelib/db/shapes.py): the cursor's row
-- comparison is then a bound of the index range (created_at <= the cursor's) in the
-- generic plan as in the custom one, so a page deep in a long history reads a page, not
-- every newer execution of the job.
SELECT execution_id, job_id, endpoint, endpoint_type, status, input, output, attempt_count,
       max_attempts, run_at, started_at, completed_at, duration_ms, created_at
FROM executions
WHERE job_id = :job_id
  AND status = :status                                              -- if status
  AND (created_at, execution_id) < (:after_ts, :after_id)           -- if after_ts
ORDER BY created_at DESC, execution_id DESC
LIMIT :limit_plus_one

-- name: executions_attempts_page
-- Attempts in attempt_number order (uq_attempts_exec_number). The cursor carries the last
-- attempt's (created_at, attempt_id); its attempt_number is looked up so the page resumes
-- right after it.
SELECT attempt_id, execution_id, attempt_number, status, started_at, completed_at,
       duration_ms, output, error, created_at
FROM attempts
WHERE execution_id = :execution_id
  AND (CAST(:after_id AS TEXT) IS NULL
       OR attempt_number > (SELECT a.attempt_number FROM attempts a
                            WHERE a.attempt_id = :after_id AND a.execution_id = :execution_id))
ORDER BY attempt_number ASC
LIMIT :limit_plus_one

-- name: executions_logs_page
-- Logs oldest first: the execution's log rows (idx_logs_by_execution) and its attempts'
-- lines (written on the attempts row by the finalize, migration 013; uq_attempts_exec_number,
-- at most max_attempts rows) as one list. (logged_at, log_id) ascending is the keyset, the
-- id ordering lines written in the same transaction (same now()); an attempt's line has
-- the attempt's id and its record time.
SELECT log_id, execution_id, attempt_number, level, message, logged_at
FROM (
    SELECT log_id, execution_id, attempt_number, level, message, logged_at
    FROM execution_logs
    WHERE execution_id = :execution_id
    UNION ALL
    SELECT attempt_id, execution_id, attempt_number, log_level, log_message, created_at
    FROM attempts
    WHERE execution_id = :execution_id
      AND log_message IS NOT NULL
) AS lines
WHERE CAST(:after_ts AS TIMESTAMPTZ) IS NULL OR (logged_at, log_id) > (:after_ts, :after_id)
ORDER BY logged_at ASC, log_id ASC
LIMIT :limit_plus_one
