-- Dead letters: the listing GET /executions, POST
-- /executions/{id}/retry and POST /endpoints/{name}/redrive. A dead letter is a FAILED
-- execution; retry and redrive move it FAILED -> QUEUED (the transition table's terminal
-- source of QUEUED, passed as :sources) with a new attempt budget. Times are created_at
-- (migrations/007_dead_letters.sql says why), so redrive moves what the view shows.

-- name: dead_letters_list
-- GET /executions: a page (dead_letters_list_page); operations_count counts one.
-- shape: endpoint never
-- include: dead_letters_list_page

-- name: dead_letters_list_of_endpoint
-- GET /executions?endpoint=NAME: a page (dead_letters_list_of_endpoint_page);
-- operations_count_of_endpoint counts one.
-- shape: endpoint always
-- include: dead_letters_list_of_endpoint_page

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
