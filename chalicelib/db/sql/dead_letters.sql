-- Dead letters: the listing GET /executions, POST
-- /executions/{id}/retry and POST /endpoints/{name}/redrive. A dead letter is a FAILED
-- execution; retry and redrive move it FAILED -> QUEUED (the transition table's terminal
-- source of QUEUED, passed as :sources) with a new attempt budget. Times are created_at
-- (migrations/007_dead_letters.sql says why), so redrive moves what the view shows.

-- part: dead_letters_list_rows
-- The rows of the listing: an execution and its last attempt's error (recorded redacted by
-- the worker), read per row on uq_attempts_exec_number. The including statement writes
-- the WHERE clause that picks the index range, then dead_letters_list_filters.
    SELECT e.execution_id, e.job_id, e.endpoint, e.endpoint_type, e.status, e.input,
           e.output, e.attempt_count, e.max_attempts, e.run_at, e.started_at,
           e.completed_at, e.duration_ms, e.created_at, last.error
    FROM executions AS e
    LEFT JOIN LATERAL (
        SELECT a.error FROM attempts AS a WHERE a.execution_id = e.execution_id
        ORDER BY a.attempt_number DESC LIMIT 1
    ) AS last ON true

-- part: dead_letters_list_filters
-- The listing's optional filters and its keyset order (created_at, execution_id)
-- descending, cut at the page size. Each tagged line ("-- if <param>") is kept only when
-- its parameter is given (chalicelib/db/shapes.py), so every filter shape is a statement
-- of its own whose generic plan is as good as its custom one: since, until and the cursor
-- bound the range of the index being read (created_at is its key after the status), and
-- the error type is the row's last_error_type (migration 014), a key of
-- idx_executions_by_error for the statuses that keep one, never a probe of each row's
-- attempts.
      AND e.endpoint = :endpoint                                    -- if endpoint
      AND e.created_at >= :since                                    -- if since
      AND e.created_at < :until                                     -- if until
      AND e.last_error_type = :error_type                           -- if error_type
      AND (e.created_at, e.execution_id) < (:after_ts, :after_id)   -- if after_ts
    ORDER BY e.created_at DESC, e.execution_id DESC
    LIMIT :limit_plus_one

-- part: dead_letters_list_running
-- The RUNNING branch of both listings: few rows (what the workers hold), read whole on
-- idx_executions_running, filtered and cut to a page.
(
-- include: dead_letters_list_rows
    WHERE e.status = 'RUNNING' AND 'RUNNING' = ANY(CAST(:statuses AS TEXT[]))
-- include: dead_letters_list_filters
)

-- name: dead_letters_list
-- GET /executions: a page (dead_letters_list_page); operations_count counts one.
-- include: dead_letters_list_page

-- part: dead_letters_list_page
-- GET /executions: newest first by (created_at, execution_id), keyset-paginated. One
-- branch per status, each cut at the page size, then merged and cut again. A branch names
-- its status as a literal so that it reads its status's partial index in order: the ended
-- ones idx_executions_ended, the waiting ones idx_executions_waiting, both keyed (status,
-- created_at DESC, execution_id DESC), and with an error type idx_executions_by_error:
-- the first page and stop, whatever the history or the backlog. RUNNING rows are
-- few (what the workers hold), read whole on idx_executions_running. A status not asked
-- for (:statuses) has a branch that is false at once (a one-time filter on a parameter,
-- in a generic plan as in a custom one). With an endpoint: dead_letters_list_of_endpoint.
SELECT p.execution_id, p.job_id, p.endpoint, p.endpoint_type, p.status, p.input, p.output,
       p.attempt_count, p.max_attempts, p.run_at, p.started_at, p.completed_at,
       p.duration_ms, p.created_at, p.error
FROM (
(
-- include: dead_letters_list_rows
    WHERE e.status = 'PENDING' AND 'PENDING' = ANY(CAST(:statuses AS TEXT[]))
-- include: dead_letters_list_filters
)
UNION ALL
(
-- include: dead_letters_list_rows
    WHERE e.status = 'QUEUED' AND 'QUEUED' = ANY(CAST(:statuses AS TEXT[]))
-- include: dead_letters_list_filters
)
UNION ALL
-- include: dead_letters_list_running
UNION ALL
(
-- include: dead_letters_list_rows
    WHERE e.status = 'RETRYING' AND 'RETRYING' = ANY(CAST(:statuses AS TEXT[]))
-- include: dead_letters_list_filters
)
UNION ALL
(
-- include: dead_letters_list_rows
    WHERE e.status = 'SUCCESS' AND 'SUCCESS' = ANY(CAST(:statuses AS TEXT[]))
-- include: dead_letters_list_filters
)
UNION ALL
(
-- include: dead_letters_list_rows
    WHERE e.status = 'FAILED' AND 'FAILED' = ANY(CAST(:statuses AS TEXT[]))
-- include: dead_letters_list_filters
)
UNION ALL
(
-- include: dead_letters_list_rows
    WHERE e.status = 'CANCELLED' AND 'CANCELLED' = ANY(CAST(:statuses AS TEXT[]))
-- include: dead_letters_list_filters
)
) AS p
ORDER BY p.created_at DESC, p.execution_id DESC
LIMIT :limit_plus_one

-- name: dead_letters_list_of_endpoint
-- GET /executions?endpoint=NAME: a page (dead_letters_list_of_endpoint_page);
-- operations_count_of_endpoint counts one.
-- include: dead_letters_list_of_endpoint_page

-- part: dead_letters_list_of_endpoint_page
-- GET /executions?endpoint=NAME (with any other filter): the same rows, filters and order
-- as dead_letters_list, each status asked for (:statuses) one range of
-- idx_executions_by_endpoint (endpoint, status, created_at DESC; migration 020) read to a
-- page and stopped, whatever the endpoint's share of the history or the backlog; RUNNING
-- rows are few (what the workers hold), read on idx_executions_running; SUCCESS rows have
-- no entry there (migration 020 says why): they are read on idx_executions_ended, the
-- endpoint's filtered out of everyone's, so an endpoint with a small share of the
-- successes reads far into them (a known limit). The statuses come
-- from unnest, and the literal list beside them is the index's predicate and no other's:
-- the status partial indexes (idx_executions_waiting, idx_executions_ended,
-- idx_executions_by_error) cannot serve this branch, where a planner that estimates the
-- endpoint from its whole history would walk one of them filtering everyone else's rows
-- out (a plan test with an endpoint of one execution caught it).
SELECT newest.execution_id, newest.job_id, newest.endpoint, newest.endpoint_type,
       newest.status, newest.input, newest.output, newest.attempt_count, newest.max_attempts,
       newest.run_at, newest.started_at, newest.completed_at, newest.duration_ms,
       newest.created_at, newest.error
FROM (
    SELECT x.execution_id, x.job_id, x.endpoint, x.endpoint_type, x.status, x.input,
           x.output, x.attempt_count, x.max_attempts, x.run_at, x.started_at,
           x.completed_at, x.duration_ms, x.created_at, x.error
    FROM unnest(CAST(:statuses AS TEXT[])) AS st (status)
    CROSS JOIN LATERAL (
-- include: dead_letters_list_rows
    WHERE e.status = st.status
      AND e.status IN ('PENDING', 'QUEUED', 'RETRYING', 'FAILED', 'CANCELLED')
-- include: dead_letters_list_filters
    ) AS x
    UNION ALL
-- include: dead_letters_list_running
    UNION ALL
    (
-- include: dead_letters_list_rows
    WHERE e.status = 'SUCCESS' AND 'SUCCESS' = ANY(CAST(:statuses AS TEXT[]))
-- include: dead_letters_list_filters
    )
) AS newest
ORDER BY newest.created_at DESC, newest.execution_id DESC
LIMIT :limit_plus_one

-- part: dead_letters_requeue
-- The requeue shared by retry and redrive: QUEUED and due now (a worker claims it on its
-- next poll, or at once when woken), with a new attempt budget on top of the attempts
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
-- place, and the caller settles its key (a retry of a
-- blocked key's failed head unblocks it: chalicelib/services/keys.py).
UPDATE executions AS e
SET status = 'QUEUED',
    run_at = now(),
    ordering_wait = (e.ordering_key IS NOT NULL OR e.concurrency_key IS NOT NULL),
    max_attempts = e.attempt_count + COALESCE((
        SELECT COALESCE(
            CAST(j.delivery_overrides -> 'retry_policy' ->> 'max_attempts' AS BIGINT),
            CASE WHEN CAST(:endpoint_version AS TEXT) = 'current'
                 THEN CAST(en.retry_policy ->> 'max_attempts' AS BIGINT)
                 ELSE CAST(j.endpoint_snapshot -> 'retry_policy' ->> 'max_attempts' AS BIGINT)
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

-- part: dead_letters_requeue_log
-- One INFO line per requeued execution (in the same statement, for exactly the rows that
-- moved), numbered with the last attempt made, saying which attempts the new budget allows.
    INSERT INTO execution_logs (execution_id, attempt_number, level, message)
    SELECT execution_id, attempt_count, 'INFO',
           :message || ' Attempts ' || CAST(attempt_count + 1 AS TEXT) || ' to '
               || CAST(max_attempts AS TEXT) || ' allowed.'
    FROM moved
    RETURNING log_id

-- part: dead_letters_retry_guard
-- The guard and the log of a retry, shared by a single retry and a bulk retry's page (the
-- including statement picks the rows by id first): FAILED (:sources) and a live endpoint.
-- The endpoint is probed per row (OFFSET 0 keeps the subquery a probe): as a join, the
-- generic plan walked every endpoint and probed the page once per endpoint.
      AND e.status = ANY(CAST(:sources AS TEXT[]))
      AND EXISTS (SELECT 1 FROM endpoints AS en
                  WHERE en.name = e.endpoint AND en.deleted_at IS NULL OFFSET 0)
    RETURNING e.execution_id, e.attempt_count, e.max_attempts, e.ordering_key,
              e.concurrency_key
), logged AS (
-- include: dead_letters_requeue_log

-- name: dead_letters_retry
-- POST /executions/{id}/retry: one compare-and-set. The guard is the transition table's
-- terminal sources of QUEUED (:sources, FAILED) and a live endpoint (a deleted endpoint
-- takes no new work); when it changes nothing, the service reads the status to explain why
-- (404, 409). A batch child's batch needs nothing: its progress is counted from statuses.
WITH moved AS (
-- include: dead_letters_requeue
    WHERE e.execution_id = :execution_id
-- include: dead_letters_retry_guard
)
SELECT execution_id, ordering_key, concurrency_key FROM moved

-- name: dead_letters_endpoint_live
-- Redrive's 404: the endpoint exists and is not deleted.
SELECT name FROM endpoints WHERE name = :name AND deleted_at IS NULL

-- part: dead_letters_redrive_match
-- The dead letters a redrive moves: the endpoint's FAILED executions created in
-- [since, until) whose last attempt failed with :error_type (any type when NULL; the
-- type is the row's last_error_type, the one GET /executions filters on). The
-- endpoint and the literal status are the first keys of idx_executions_by_endpoint, so
-- the endpoint's dead letters are one range of it.
    FROM executions AS x
    WHERE x.endpoint = :endpoint
      AND x.status = 'FAILED'
      AND x.created_at >= :since
      AND x.created_at < :until
      AND (CAST(:error_type AS TEXT) IS NULL OR x.last_error_type = :error_type)

-- name: dead_letters_redrive_batch
-- POST /endpoints/{name}/redrive, one batch (one transaction): the endpoint's next :batch
-- dead letters of dead_letters_redrive_match, requeued. picked walks the endpoint's
-- (endpoint, 'FAILED') range of idx_executions_by_endpoint newest first and stops at :batch; the UPDATE re-checks
-- the source statuses, so a row another redrive or retry moved meanwhile is left alone. Idempotent by construction:
-- it only moves FAILED rows, so a second call over the same range finds none (unless some
-- failed again since). No cursor is needed between batches: moved rows leave the index.
WITH picked AS (
    SELECT x.execution_id
-- include: dead_letters_redrive_match
    ORDER BY x.created_at DESC, x.execution_id DESC
    LIMIT :batch
), moved AS (
-- include: dead_letters_requeue
    WHERE e.execution_id IN (SELECT execution_id FROM picked)
      AND e.status = ANY(CAST(:sources AS TEXT[]))
    RETURNING e.execution_id, e.attempt_count, e.max_attempts, e.ordering_key,
              e.concurrency_key
), logged AS (
-- include: dead_letters_requeue_log
)
SELECT (SELECT count(*) FROM moved) AS requeued,
       ARRAY(SELECT execution_id FROM moved
             WHERE ordering_key IS NOT NULL OR concurrency_key IS NOT NULL) AS keyed

-- name: dead_letters_redrive_more
-- After the request's last batch: does a matching dead letter remain (a redrive stops after
-- a bounded number of rows per request; the client calls again)? One probe of the same
-- index range, stopping at the first row.
SELECT EXISTS (
    SELECT 1
-- include: dead_letters_redrive_match
) AS more
