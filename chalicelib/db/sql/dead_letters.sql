-- Dead letters: the listing GET /executions, POST
-- /executions/{id}/retry and POST /endpoints/{name}/redrive. A dead letter is a FAILED
-- execution; retry and redrive move it FAILED -> QUEUED (the transition table's terminal
-- source of QUEUED, passed as :sources) with a new attempt budget. Times are created_at
-- (migrations/007_dead_letters.sql says why), so redrive moves what the view shows.

-- name: dead_letters_list
-- GET /executions: a page (dead_letters_list_page); operations_count counts one.
-- shape: endpoint never
-- The page's order is written again: a CTE's ORDER BY orders the rows it passes on only
-- where the outer query keeps them so (PostgreSQL does: the plan is the page's own).
WITH
-- include: dead_letters_rows
, -- include: dead_letters_running_or_succeeded
, -- include: dead_letters_list_page
SELECT execution_id, job_id, endpoint, endpoint_type, status, input, output, attempt_count,
       max_attempts, run_at, started_at, completed_at, duration_ms, created_at, error
FROM dead_letters_list_page
ORDER BY created_at DESC, execution_id DESC

-- name: dead_letters_list_of_endpoint
-- GET /executions?endpoint=NAME: a page (dead_letters_list_of_endpoint_page);
-- operations_count_of_endpoint counts one.
-- shape: endpoint always
-- The page's order is written again: a CTE's ORDER BY orders the rows it passes on only
-- where the outer query keeps them so (PostgreSQL does: the plan is the page's own).
WITH
-- include: dead_letters_rows
, -- include: dead_letters_running_or_succeeded
, -- include: dead_letters_list_of_endpoint_page
SELECT execution_id, job_id, endpoint, endpoint_type, status, input, output, attempt_count,
       max_attempts, run_at, started_at, completed_at, duration_ms, created_at, error
FROM dead_letters_list_of_endpoint_page
ORDER BY created_at DESC, execution_id DESC

-- name: dead_letters_retry
-- POST /executions/{id}/retry: one compare-and-set (parts requeued and requeue_logged say
-- what a requeue does and guards); when it changes nothing, the service reads the status to
-- explain why (404, 409). A batch child's batch needs nothing: its progress is counted from
-- statuses.
WITH targets AS (
    SELECT CAST(:execution_id AS TEXT) AS execution_id
)
, -- include: requeued
, -- include: requeue_logged
SELECT execution_id, ordering_key, concurrency_key FROM requeued

-- name: dead_letters_endpoint_live
-- Redrive's 404: the endpoint exists and is not deleted.
SELECT name FROM endpoints WHERE name = :name AND deleted_at IS NULL

-- name: dead_letters_redrive_batch
-- POST /endpoints/{name}/redrive, one batch (one transaction): the endpoint's next :batch
-- dead letters, requeued and logged as dead_letters_retry requeues one (parts requeued and
-- requeue_logged). targets walks the endpoint's (endpoint, 'FAILED') range of
-- idx_executions_by_endpoint newest first and stops at :batch; the UPDATE re-checks the
-- source statuses (and the endpoint's, checked before by dead_letters_endpoint_live), so a
-- row another redrive or retry moved meanwhile is left alone.
-- Idempotent by construction: it only moves FAILED rows, so a second call over the same
-- range finds none (unless some failed again since). No cursor is needed between
-- batches: moved rows leave the index.
-- targets: the dead letters a redrive moves, the endpoint's FAILED executions created in
-- [since, until) whose last attempt failed with :error_type (any type when NULL; the
-- type is the row's last_error_type, the one GET /executions filters on). The
-- endpoint and the literal status are the first keys of idx_executions_by_endpoint, so
-- the endpoint's dead letters are one range of it.
WITH targets AS (
    SELECT x.execution_id
    FROM executions AS x
    WHERE x.endpoint = :endpoint
      AND x.status = 'FAILED'
      AND x.created_at >= :since
      AND x.created_at < :until
      AND (CAST(:error_type AS TEXT) IS NULL OR x.last_error_type = :error_type)
    ORDER BY x.created_at DESC, x.execution_id DESC
    LIMIT :batch
)
, -- include: requeued
, -- include: requeue_logged
SELECT (SELECT count(*) FROM requeued) AS requeued,
       ARRAY(SELECT execution_id FROM requeued
             WHERE ordering_key IS NOT NULL OR concurrency_key IS NOT NULL) AS keyed

-- name: dead_letters_redrive_more
-- After the request's last batch: does a matching dead letter remain (a redrive stops after
-- a bounded number of rows per request; the client calls again)? One probe of the same
-- index range as dead_letters_redrive_batch's picked (the two change together), stopping
-- at the first row.
SELECT EXISTS (
    SELECT 1
    FROM executions AS x
    WHERE x.endpoint = :endpoint
      AND x.status = 'FAILED'
      AND x.created_at >= :since
      AND x.created_at < :until
      AND (CAST(:error_type AS TEXT) IS NULL OR x.last_error_type = :error_type)
) AS more
