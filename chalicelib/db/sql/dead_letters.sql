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
-- POST /executions/{id}/retry: one compare-and-set. The guard is the transition table's
-- terminal sources of QUEUED (:sources, FAILED) and a live endpoint (a deleted endpoint
-- takes no new work); when it changes nothing, the service reads the status to explain why
-- (404, 409). A batch child's batch needs nothing: its progress is counted from statuses.
-- moved: the requeue (dead_letters_redrive_batch and operations_retry_page write the same
-- SET and log line: the three change together): QUEUED and due now (a worker claims it on
-- its next poll, or at once when woken), with a new attempt budget on top of the attempts
-- made: attempt_count is kept, so attempt numbers continue and the history stays, and
-- max_attempts grows by the job's retry policy (its endpoint snapshot, as when the
-- execution was created). What belonged to the failed end (completed_at, duration, the
-- last worker and lease) is cleared; output stays (a FAILED execution has none). The config
-- snapshot is cleared too: it keeps one budget's retries consistent, and a new budget is a
-- new run, which resolves the config as it is now (an operator who fixed a config and
-- redrives gets the fix). The endpoint is the job's snapshot, as for every run of it,
-- unless the request asks for its current definition (:endpoint_version 'current': the
-- claim then reads the endpoint row, and the new budget is that definition's); the job's
-- own retry policy (delivery_overrides, migration 025) wins over either. A new budget
-- also measures max_retry_duration_ms afresh (first_started_at cleared). A keyed execution
-- (an ordering key, or a gated concurrency key) comes back waiting for its turn at its old
-- place, and the caller settles its key (a retry of a blocked key's failed head unblocks
-- it: chalicelib/services/keys.py).
-- The live endpoint is probed per row (OFFSET 0 keeps the subquery a probe): as a join,
-- the generic plan walked every endpoint and probed the page once per endpoint.
-- logged: one INFO line per requeued execution (in the same statement, for exactly the
-- rows that moved), numbered with the last attempt made, saying which attempts the new
-- budget allows.
WITH moved AS (
    UPDATE executions AS e
    SET status = 'QUEUED',
        run_at = now(),
        ordering_wait = (e.ordering_key IS NOT NULL OR e.concurrency_key IS NOT NULL),
        max_attempts = e.attempt_count + COALESCE((
            SELECT COALESCE(
                CAST(j.delivery_overrides -> 'retry_policy' ->> 'max_attempts' AS BIGINT),
                CASE WHEN CAST(:endpoint_version AS TEXT) = 'current'
                     THEN CAST(en.retry_policy ->> 'max_attempts' AS BIGINT)
                     ELSE CAST(j.endpoint_snapshot -> 'retry_policy' ->> 'max_attempts'
                               AS BIGINT)
                END)
            FROM jobs AS j
            LEFT JOIN endpoints AS en ON en.name = j.endpoint
            WHERE j.job_id = e.job_id), 1),
        endpoint_version = CAST(:endpoint_version AS TEXT),
        first_started_at = NULL,
        started_at = NULL,
        completed_at = NULL,
        duration_ms = NULL,
        worker_id = NULL,
        lease_expires_at = NULL,
        config_snapshot = NULL
    WHERE e.execution_id = :execution_id
      AND e.status = ANY(CAST(:sources AS TEXT[]))
      AND EXISTS (SELECT 1 FROM endpoints AS en
                  WHERE en.name = e.endpoint AND en.deleted_at IS NULL OFFSET 0)
    RETURNING e.execution_id, e.attempt_count, e.max_attempts, e.ordering_key,
              e.concurrency_key
), logged AS (
    INSERT INTO execution_logs (execution_id, attempt_number, level, message)
    SELECT execution_id, attempt_count, 'INFO',
           :message || ' Attempts ' || CAST(attempt_count + 1 AS TEXT) || ' to '
               || CAST(max_attempts AS TEXT) || ' allowed.'
    FROM moved
    RETURNING log_id
)
SELECT execution_id, ordering_key, concurrency_key FROM moved

-- name: dead_letters_endpoint_live
-- Redrive's 404: the endpoint exists and is not deleted.
SELECT name FROM endpoints WHERE name = :name AND deleted_at IS NULL

-- name: dead_letters_redrive_batch
-- POST /endpoints/{name}/redrive, one batch (one transaction): the endpoint's next :batch
-- dead letters, requeued and logged as dead_letters_retry requeues one (that statement
-- says why each step is so). picked walks the endpoint's (endpoint, 'FAILED') range of
-- idx_executions_by_endpoint newest first and stops at :batch; the UPDATE re-checks the
-- source statuses, so a row another redrive or retry moved meanwhile is left alone.
-- Idempotent by construction: it only moves FAILED rows, so a second call over the same
-- range finds none (unless some failed again since). No cursor is needed between
-- batches: moved rows leave the index.
-- picked: the dead letters a redrive moves, the endpoint's FAILED executions created in
-- [since, until) whose last attempt failed with :error_type (any type when NULL; the
-- type is the row's last_error_type, the one GET /executions filters on). The
-- endpoint and the literal status are the first keys of idx_executions_by_endpoint, so
-- the endpoint's dead letters are one range of it.
WITH picked AS (
    SELECT x.execution_id
    FROM executions AS x
    WHERE x.endpoint = :endpoint
      AND x.status = 'FAILED'
      AND x.created_at >= :since
      AND x.created_at < :until
      AND (CAST(:error_type AS TEXT) IS NULL OR x.last_error_type = :error_type)
    ORDER BY x.created_at DESC, x.execution_id DESC
    LIMIT :batch
), moved AS (
    UPDATE executions AS e
    SET status = 'QUEUED',
        run_at = now(),
        ordering_wait = (e.ordering_key IS NOT NULL OR e.concurrency_key IS NOT NULL),
        max_attempts = e.attempt_count + COALESCE((
            SELECT COALESCE(
                CAST(j.delivery_overrides -> 'retry_policy' ->> 'max_attempts' AS BIGINT),
                CASE WHEN CAST(:endpoint_version AS TEXT) = 'current'
                     THEN CAST(en.retry_policy ->> 'max_attempts' AS BIGINT)
                     ELSE CAST(j.endpoint_snapshot -> 'retry_policy' ->> 'max_attempts'
                               AS BIGINT)
                END)
            FROM jobs AS j
            LEFT JOIN endpoints AS en ON en.name = j.endpoint
            WHERE j.job_id = e.job_id), 1),
        endpoint_version = CAST(:endpoint_version AS TEXT),
        first_started_at = NULL,
        started_at = NULL,
        completed_at = NULL,
        duration_ms = NULL,
        worker_id = NULL,
        lease_expires_at = NULL,
        config_snapshot = NULL
    WHERE e.execution_id IN (SELECT execution_id FROM picked)
      AND e.status = ANY(CAST(:sources AS TEXT[]))
    RETURNING e.execution_id, e.attempt_count, e.max_attempts, e.ordering_key,
              e.concurrency_key
), logged AS (
    INSERT INTO execution_logs (execution_id, attempt_number, level, message)
    SELECT execution_id, attempt_count, 'INFO',
           :message || ' Attempts ' || CAST(attempt_count + 1 AS TEXT) || ' to '
               || CAST(max_attempts AS TEXT) || ' allowed.'
    FROM moved
    RETURNING log_id
)
SELECT (SELECT count(*) FROM moved) AS requeued,
       ARRAY(SELECT execution_id FROM moved
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
