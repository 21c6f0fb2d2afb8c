-- Bulk actions on executions (POST /executions/bulk) and their progress (GET
-- /operations/{id}, POST /operations/{id}/abort); migrations/026_bulk_operations.sql.
-- A page of an operation is read with GET /executions' own statements
-- (dead_letters_list, dead_letters_list_of_endpoint: bounded by the page, on the status
-- indexes), then acted on here by id, each action with the guard and the writes of its
-- single-execution route, so a bulk action is N single actions.

-- name: operations_insert
-- A new operation, RUNNING from its first statement: its created_at fixes its set.
INSERT INTO bulk_operations (action, filter)
VALUES (:action, CAST(:filter AS JSONB))
RETURNING
    operation_id, action, filter, state, matched, done, refused, after_ts, after_id, error,
    created_at, ended_at

-- name: operations_get
SELECT
    operation_id, action, filter, state, matched, done, refused, after_ts, after_id, error,
    created_at, ended_at
FROM bulk_operations WHERE operation_id = :operation_id

-- name: operations_next_running
-- The loop's pick: the RUNNING operation that advanced longest ago, first entry of
-- idx_bulk_operations_running. Only a hint: the page's own transaction locks the row and
-- re-checks its state (operations_lock_running).
SELECT operation_id, action
FROM bulk_operations
WHERE state = 'RUNNING'
ORDER BY advanced_at ASC, operation_id ASC
LIMIT 1

-- name: operations_lock_running
-- A page's first read: the operation, if still RUNNING, locked until the page commits. A
-- second scheduler on the same operation waits here and then reads the cursor the first
-- one wrote (READ COMMITTED re-reads the locked row; SERIALIZABLE answers 40001 and the
-- transaction helper runs the page again), so no page is acted on twice; an abort waits
-- for the page in flight, and no page starts after it.
SELECT
    operation_id, action, filter, state, matched, done, refused, after_ts, after_id, error,
    created_at, ended_at
FROM bulk_operations
WHERE operation_id = :operation_id AND state = 'RUNNING'
FOR UPDATE

-- name: operations_record_page
-- The page's progress, in the page's transaction: the counters grow by what it read and
-- did, the cursor moves to its last execution, and the last page ends the operation.
UPDATE bulk_operations
SET matched = matched + CAST(:matched AS BIGINT),
    done = done + CAST(:done AS BIGINT),
    refused = refused + CAST(:matched AS BIGINT) - CAST(:done AS BIGINT),
    after_ts = COALESCE(CAST(:after_ts AS TIMESTAMPTZ), after_ts),
    after_id = COALESCE(CAST(:after_id AS TEXT), after_id),
    advanced_at = now(),
    state = CASE WHEN CAST(:last AS BOOLEAN) THEN 'DONE' ELSE state END,
    ended_at = CASE WHEN CAST(:last AS BOOLEAN) THEN now() ELSE ended_at END
WHERE operation_id = :operation_id AND state = 'RUNNING'
RETURNING
    operation_id, action, filter, state, matched, done, refused, after_ts, after_id, error,
    created_at, ended_at

-- name: operations_end
-- Ends a RUNNING operation: ABORTED by POST /operations/{id}/abort, FAILED (with the
-- error) when a page failed in a way a retry will not fix. The guard on state makes it a
-- compare-and-set: an operation that ended already keeps its end.
UPDATE bulk_operations
SET state = :state, error = :error, ended_at = now(), advanced_at = now()
WHERE operation_id = :operation_id AND state = 'RUNNING'
RETURNING
    operation_id, action, filter, state, matched, done, refused, after_ts, after_id, error,
    created_at, ended_at

-- name: operations_retry_page
-- Retry of a page: dead_letters_retry for each of :ids at once (parts requeued and
-- requeue_logged), so only FAILED executions of a live endpoint move; the others are the
-- page's refusals.
WITH targets AS (
    SELECT x.execution_id FROM unnest(CAST(:ids AS TEXT[])) AS x (execution_id)
)
, -- include: requeued
, -- include: requeue_logged
SELECT (SELECT count(*) FROM requeued) AS moved,
       ARRAY(SELECT execution_id FROM requeued
             WHERE ordering_key IS NOT NULL OR concurrency_key IS NOT NULL) AS keyed

-- name: operations_cancel_page
-- Cancel of a page: executions_cancel for each of :ids at once (the CANCELLED transition
-- guarded by the transition table's sources, and its log line); a worker that claimed a
-- row first wins it. batch_id: what the service checks for completed batches after.
WITH moved AS (
    UPDATE executions
    SET status = 'CANCELLED', completed_at = now(), worker_id = NULL
    WHERE execution_id = ANY(CAST(:ids AS TEXT[])) AND status = ANY(CAST(:sources AS TEXT[]))
    RETURNING execution_id, attempt_count, batch_id, ordering_key, concurrency_key
), logged AS (
    INSERT INTO execution_logs (execution_id, attempt_number, level, message)
    SELECT execution_id, attempt_count, 'INFO', :message FROM moved
    RETURNING log_id
)
SELECT execution_id, batch_id, ordering_key, concurrency_key FROM moved

-- name: operations_delete_page
-- Delete of a page: its ended executions (SUCCESS, FAILED, CANCELLED) with their logs and
-- attempts, as the housekeeper purges history (the parts logs, tries, execs), and the
-- one-shot jobs this leaves without an execution (a cron job stays: its executions are
-- its history, not the job). The page runs SERIALIZABLE, so an execution a retry moves
-- meanwhile is not deleted behind it.
WITH doomed AS (
    SELECT x.execution_id, x.job_id
    FROM executions AS x
    WHERE x.execution_id = ANY(CAST(:ids AS TEXT[]))
      AND x.status IN ('SUCCESS', 'FAILED', 'CANCELLED')
)
, -- include: logs
, -- include: tries
, -- include: execs
, gone AS (
    -- Every statement of this one reads the executions as they were before it: a job's
    -- executions outside the page keep it. The probe is ordered as idx_executions_by_job
    -- (job_id, created_at DESC) so that it walks the job's range: left to its estimate,
    -- the planner hoped a sequential scan would meet another execution of the job early,
    -- and for a job with none read the whole table once per job of the page.
    DELETE FROM jobs
    WHERE job_id = ANY(ARRAY(SELECT job_id FROM doomed))
      AND trigger_type <> 'CRON'
      AND NOT EXISTS (
          SELECT 1 FROM executions AS x
          WHERE x.job_id = jobs.job_id
            AND x.execution_id <> ALL(ARRAY(SELECT d.execution_id FROM doomed AS d))
          ORDER BY x.job_id, x.created_at DESC
          LIMIT 1
      )
    RETURNING job_id
)
SELECT (SELECT count(*) FROM execs) AS deleted, (SELECT count(*) FROM gone) AS jobs

-- name: operations_count
-- POST /executions/bulk/count: how many executions a bulk action's filter matches, as a
-- page of GET /executions with :limit_plus_one rows lists them (dead_letters_list_page,
-- the listing's own statement, counted), so the count costs what that page costs,
-- whatever the history, and a count past the limit says "more". The same rows a bulk
-- page reads, by construction. With an endpoint: operations_count_of_endpoint.
-- shape: endpoint never
WITH
-- include: dead_letters_rows
, -- include: dead_letters_running_or_succeeded
, -- include: dead_letters_list_page
SELECT count(*) AS matched
FROM dead_letters_list_page AS counted

-- name: operations_count_of_endpoint
-- operations_count with an endpoint: a page of dead_letters_list_of_endpoint, counted.
-- shape: endpoint always
WITH
-- include: dead_letters_rows
, -- include: dead_letters_running_or_succeeded
, -- include: dead_letters_list_of_endpoint_page
SELECT count(*) AS matched
FROM dead_letters_list_of_endpoint_page AS counted
