-- Housekeeping: bounded history (retention) and bounded heartbeat rows.
--
-- Run by the scheduler's housekeeper loop (chalicelib/scheduler/housekeeper.py), any number
-- of schedulers at once: every statement takes a bounded batch with SKIP LOCKED (two
-- schedulers split the work instead of queueing), and deleting what another scheduler
-- already deleted finds nothing. Only terminal history is touched: the claim, finalize,
-- promoter and reclaimer work on non-terminal rows through their partial indexes, so the
-- purge neither waits on the hot path nor makes it wait.
--
-- Deletes run children first within one statement (logs, attempts, then executions, then
-- one-shot jobs); the foreign keys are checked at the end of the statement, when the
-- children are gone. The clock is a parameter (:cutoff), as in scheduler.sql.

-- name: housekeeping_prune_heartbeats
-- region_heartbeats gets one row per process (<role>@<host>:<pid>) and a process that
-- stopped beating (crashed, or wrote DEAD on shutdown) never comes back under that name:
-- rows silent since :cutoff (a day ago) are removed, except the newest row of each kind
-- (migration 022): it is how GET /health knows that a kind has run in this deployment, so
-- a worker stopped a week ago is still PROCESS_DOWN. The table holds a row per live
-- process plus a day of dead ones, so one unbounded DELETE stays small; the newest row of
-- each kind is a probe of idx_region_heartbeats_kind.
WITH newest AS (
    SELECT k.kind,
           (
               SELECT n.fresh_until
               FROM region_heartbeats AS n
               WHERE n.kind = k.kind
               ORDER BY n.fresh_until DESC
               LIMIT 1
           ) AS fresh_until
    FROM (VALUES ('api'), ('scheduler'), ('worker')) AS k (kind)
)
DELETE FROM region_heartbeats AS h
WHERE h.last_beat_at < CAST(:cutoff AS TIMESTAMPTZ)
  AND NOT EXISTS (
      SELECT 1 FROM newest AS w WHERE w.kind = h.kind AND w.fresh_until = h.fresh_until
  )

-- name: housekeeping_purge_one_shot
-- One-shot jobs created before :cutoff whose execution finished before :cutoff, with the
-- execution, its attempts and its logs; and one-shot jobs left without any execution. The
-- oldest first, on idx_jobs_created (created_at <= completed_at, so no finished execution
-- older than the cutoff hides behind a newer job), each job's execution on
-- idx_executions_by_job, attempts and logs on their by-execution indexes. A one-shot job
-- still live (a DELAYED run_at far ahead) is skipped. FOR UPDATE OF jobs SKIP LOCKED:
-- concurrent housekeepers take disjoint batches.
-- A one-shot job has one execution, but nothing in the schema says so: a job with a
-- second execution that is not itself purgeable (live, or finished after :cutoff) is
-- skipped (NOT EXISTS, one probe of idx_executions_by_job), since deleting the job would
-- break fk_executions_job and fail the whole batch, every pass (no row may stop a
-- background loop). It goes once all its executions are purgeable.
-- Both probes of idx_executions_by_job are subqueries with OFFSET 0, which the planner
-- keeps as per-job probes: written as a join and NOT EXISTS, it chose by its estimate of
-- how many jobs expired, and at some estimates (a stale one, after a backlog was purged)
-- hashed the join against a sequential scan of every execution, 300,800 rows per pass at
-- 10^5 executions in the scale bench.
WITH doomed AS (
    SELECT j.job_id, e.execution_id
    FROM jobs AS j
    LEFT JOIN LATERAL (  -- every execution of the job: NOT EXISTS says all are purgeable
        SELECT x.execution_id FROM executions AS x WHERE x.job_id = j.job_id OFFSET 0
    ) AS e ON TRUE
    WHERE j.trigger_type <> 'CRON'
      AND j.created_at < CAST(:cutoff AS TIMESTAMPTZ)
      AND NOT EXISTS (
          SELECT 1 FROM executions AS x
          WHERE x.job_id = j.job_id
            AND (x.status NOT IN ('SUCCESS', 'FAILED', 'CANCELLED')
                 OR x.completed_at IS NULL
                 OR x.completed_at >= CAST(:cutoff AS TIMESTAMPTZ))
          OFFSET 0)
    ORDER BY j.created_at ASC
    LIMIT :batch
    FOR UPDATE OF j SKIP LOCKED
)
, -- include: logs
, -- include: tries
, -- include: execs
, gone AS (
    -- The page is cut by execution, so a job whose executions straddle its end keeps the
    -- ones past it, and itself, until a later pass takes them (deleted with one of them
    -- left, it broke fk_executions_job and failed the batch every pass). Every statement
    -- of this one reads the executions as they were before it: those not in the page
    -- are the job's leftovers.
    DELETE FROM jobs
    WHERE job_id = ANY(ARRAY(SELECT job_id FROM doomed))
      AND NOT EXISTS (
          SELECT 1 FROM executions AS x
          WHERE x.job_id = jobs.job_id
            AND x.execution_id <> ALL(ARRAY(
                SELECT d.execution_id FROM doomed AS d WHERE d.execution_id IS NOT NULL))
          OFFSET 0
      )
    RETURNING job_id
)
SELECT (SELECT count(*) FROM doomed) AS batch, (SELECT count(*) FROM execs) AS executions,
       (SELECT count(*) FROM tries) AS attempts, (SELECT count(*) FROM logs) AS logs,
       (SELECT count(*) FROM gone) AS jobs

-- name: housekeeping_purge_cron
-- Cron ticks created and finished before :cutoff, with their attempts and logs. The cron
-- job itself stays (its version chain is its history). Cron jobs on idx_jobs_cron (partial,
-- few rows), then each job's old executions as a range of idx_executions_by_job
-- (job_id, created_at < :cutoff), oldest first, so the cost follows what is deleted. The
-- range is a LATERAL subquery in created_at order with its own LIMIT, which only that
-- index serves without a sort: written as a join with a bare LIMIT, the generic plan (made
-- without :cutoff, so estimating a third of the table older than it) read executions
-- sequentially until it had a page, which is the whole table when the expired rows are
-- few or lie at its end.
WITH doomed AS (
    SELECT e.execution_id
    FROM jobs AS j
    CROSS JOIN LATERAL (
        SELECT x.execution_id
        FROM executions AS x
        WHERE x.job_id = j.job_id
          AND x.created_at < CAST(:cutoff AS TIMESTAMPTZ)
          AND x.status IN ('SUCCESS', 'FAILED', 'CANCELLED')
          AND x.completed_at < CAST(:cutoff AS TIMESTAMPTZ)
        ORDER BY x.created_at ASC
        LIMIT :batch
        FOR UPDATE SKIP LOCKED
    ) AS e
    WHERE j.trigger_type = 'CRON'
    LIMIT :batch
)
, -- include: logs
, -- include: tries
, -- include: execs
SELECT (SELECT count(*) FROM doomed) AS batch, (SELECT count(*) FROM execs) AS executions,
       (SELECT count(*) FROM tries) AS attempts, (SELECT count(*) FROM logs) AS logs,
       0 AS jobs

-- name: housekeeping_prune_metric_events
-- metric_events gets one row per scheduler iteration that materialized or reclaimed
-- something; GET /metrics reads the last minute. Rows older than :cutoff (a day) go, on
-- the primary key (event, recorded_at), so the table stays a day of rows.
DELETE FROM metric_events
WHERE event IN ('cron_ticks_materialized', 'reclaimed')
  AND recorded_at < CAST(:cutoff AS TIMESTAMPTZ)

-- part: old
-- "old": the oldest :batch minute rows older than :cutoff (their minute over long enough
-- ago that no finalize still adds to them), in primary key order (deterministic, so the
-- roll-up's two statements see the same rows in their transaction).
old AS (
    SELECT grain, bucket_start, endpoint, outcome, error_type, writer, attempts, ended,
           duration_ms, le_10, le_50, le_100, le_250, le_500, le_1000, le_5000, le_30000
    FROM delivery_counts
    WHERE grain = 'minute' AND bucket_start < CAST(:cutoff AS TIMESTAMPTZ)
    ORDER BY grain, bucket_start, endpoint, outcome, error_type, writer
    LIMIT :batch
)

-- name: housekeeping_fold_counts
-- First statement of a roll-up (delivery_counts, migration 019): adds the oldest :batch
-- minute rows older than :cutoff into the rows only the housekeeper writes (writer
-- 'fold'): each (endpoint, outcome, error type)'s 'total', and each minute's 'series' row
-- per outcome for all endpoints. housekeeping_fold_delete then deletes the same rows in the
-- same transaction (two statements: CockroachDB refuses one that modifies a table twice).
-- At SERIALIZABLE, two schedulers rolling up at once cannot both count a row: one of them
-- fails (40001) and its retry finds the rows gone. Returns how many were rolled up.
WITH
-- include: old
, additions AS (
    SELECT 'total' AS grain, CAST('1970-01-01T00:00:00Z' AS TIMESTAMPTZ) AS bucket_start,
           endpoint, outcome, error_type, 'fold' AS writer,
           sum(attempts) AS attempts, sum(ended) AS ended, sum(duration_ms) AS duration_ms,
           sum(le_10) AS le_10, sum(le_50) AS le_50, sum(le_100) AS le_100,
           sum(le_250) AS le_250, sum(le_500) AS le_500, sum(le_1000) AS le_1000,
           sum(le_5000) AS le_5000, sum(le_30000) AS le_30000
    FROM old
    GROUP BY endpoint, outcome, error_type
    UNION ALL
    SELECT 'series' AS grain, bucket_start, '' AS endpoint, outcome, '' AS error_type,
           'fold' AS writer,
           sum(attempts) AS attempts, sum(ended) AS ended, sum(duration_ms) AS duration_ms,
           sum(le_10) AS le_10, sum(le_50) AS le_50, sum(le_100) AS le_100,
           sum(le_250) AS le_250, sum(le_500) AS le_500, sum(le_1000) AS le_1000,
           sum(le_5000) AS le_5000, sum(le_30000) AS le_30000
    FROM old
    GROUP BY bucket_start, outcome
)
, -- include: counted
SELECT (SELECT count(*) FROM old) AS folded

-- name: housekeeping_fold_delete
-- Second statement of a roll-up: the rows housekeeping_fold_counts added up.
WITH
-- include: old
DELETE FROM delivery_counts
WHERE (grain, bucket_start, endpoint, outcome, error_type, writer) IN (
    SELECT grain, bucket_start, endpoint, outcome, error_type, writer FROM old
)

-- name: housekeeping_mark_totals
-- Once an hour (:hour, the hour's start): each endpoint's totals by outcome as they stand,
-- the marks a window of a day subtracts (overview_endpoint_health). Written once: a later
-- pass in the same hour, or a second scheduler, changes nothing. Reads the totals (a row
-- per endpoint, outcome and error type).
INSERT INTO delivery_marks (hour, endpoint, outcome, attempts, ended)
SELECT CAST(:hour AS TIMESTAMPTZ), endpoint, outcome, sum(attempts), sum(ended)
FROM delivery_counts
WHERE grain = 'total'
GROUP BY endpoint, outcome
ON CONFLICT (hour, endpoint, outcome) DO NOTHING

-- name: housekeeping_prune_series
-- Series rows older than :cutoff (the dashboard shows the last hour): one range of the
-- primary key, a pass's worth of minutes.
DELETE FROM delivery_counts
WHERE grain = 'series' AND bucket_start < CAST(:cutoff AS TIMESTAMPTZ)

-- name: housekeeping_prune_marks
-- Marks older than :cutoff (a window subtracts the mark of a day ago): one range of the
-- primary key, an hour's marks a pass at most.
DELETE FROM delivery_marks
WHERE hour < CAST(:cutoff AS TIMESTAMPTZ)

-- name: housekeeping_purge_operations
-- Bulk operations (migration 026) that ended (DONE, ABORTED, FAILED) before :cutoff, the
-- oldest first, at most :batch: a range of idx_bulk_operations_ended (migration 029), which
-- has no entry for a RUNNING operation, so one is never taken however old. FOR UPDATE SKIP
-- LOCKED: concurrent housekeepers take disjoint batches. Every row ended, so nothing else
-- writes it but an abort of an ABORTED one (a no-op read). Each batch commits on its own: a
-- pass stopped between batches leaves whole operations, and the next one goes on from the
-- oldest left.
WITH doomed AS (
    SELECT o.operation_id
    FROM bulk_operations AS o
    WHERE o.state IN ('DONE', 'ABORTED', 'FAILED')
      AND o.ended_at < CAST(:cutoff AS TIMESTAMPTZ)
    ORDER BY o.ended_at ASC, o.operation_id ASC
    LIMIT :batch
    FOR UPDATE SKIP LOCKED
), gone AS (
    DELETE FROM bulk_operations
    WHERE operation_id = ANY(ARRAY(SELECT operation_id FROM doomed))
    RETURNING operation_id
)
SELECT (SELECT count(*) FROM gone) AS operations

-- name: housekeeping_prune_ordering_keys
-- The ordering_keys rows of keys that are not blocked, untouched since :cutoff (a day ago)
-- and without an execution left to order, at most :batch, oldest touch first: one range of
-- idx_ordering_keys_idle, up to the batch's last key in its order (a join to the batch's
-- keys was hashed against every idle key under the generic plan; a bound on the touch
-- alone read every key touched at that instant), and one probe of
-- idx_executions_ordering per key (its live executions only). Every statement that settles a key writes its row first (INSERT ... ON
-- CONFLICT DO UPDATE), so a key that gets a job again simply gets a new row. Sent alone
-- (SERIALIZABLE): a creation on the key at the same time conflicts with this read of its
-- executions and one of the two is retried; a settle at READ COMMITTED rewrites the row
-- (touched_at), which the re-checked conditions then exclude.
WITH bound AS (  -- the batch's last key in the index's order: the range up to it is the batch
    SELECT i.touched_at, i.endpoint, i.ordering_key
    FROM (
        SELECT o.touched_at, o.endpoint, o.ordering_key
        FROM ordering_keys AS o
        WHERE o.blocked_execution_id IS NULL
          AND o.touched_at < CAST(:cutoff AS TIMESTAMPTZ)
        ORDER BY o.touched_at ASC, o.endpoint ASC, o.ordering_key ASC
        LIMIT :batch
    ) AS i
    ORDER BY i.touched_at DESC, i.endpoint DESC, i.ordering_key DESC
    LIMIT 1
)
DELETE FROM ordering_keys AS o
WHERE o.blocked_execution_id IS NULL
  AND o.touched_at <= (SELECT b.touched_at FROM bound AS b)
  AND (o.touched_at, o.endpoint, o.ordering_key)
      <= ((SELECT b.touched_at FROM bound AS b), (SELECT b.endpoint FROM bound AS b),
          (SELECT b.ordering_key FROM bound AS b))
  AND o.touched_at < CAST(:cutoff AS TIMESTAMPTZ)
  AND NOT EXISTS (
      SELECT 1 FROM executions AS x
      WHERE x.endpoint = o.endpoint AND x.ordering_key = o.ordering_key
        AND x.status IN ('PENDING', 'QUEUED', 'RUNNING', 'RETRYING')
      LIMIT 1
  )

-- name: housekeeping_prune_concurrency_keys
-- The concurrency_keys rows of keys untouched since :cutoff (a day ago) and without a live
-- gated execution, at most :batch, oldest touch first: one range of
-- idx_concurrency_keys_idle up to the batch's last key in its order, and one probe of
-- idx_executions_concurrency per key, as housekeeping_prune_ordering_keys does (the same
-- races, the same answers: a key that gets a gated execution again gets a new row).
WITH bound AS (  -- the batch's last key in the index's order: the range up to it is the batch
    SELECT i.touched_at, i.endpoint, i.concurrency_key
    FROM (
        SELECT c.touched_at, c.endpoint, c.concurrency_key
        FROM concurrency_keys AS c
        WHERE c.touched_at < CAST(:cutoff AS TIMESTAMPTZ)
        ORDER BY c.touched_at ASC, c.endpoint ASC, c.concurrency_key ASC
        LIMIT :batch
    ) AS i
    ORDER BY i.touched_at DESC, i.endpoint DESC, i.concurrency_key DESC
    LIMIT 1
)
DELETE FROM concurrency_keys AS c
WHERE c.touched_at <= (SELECT b.touched_at FROM bound AS b)
  AND (c.touched_at, c.endpoint, c.concurrency_key)
      <= ((SELECT b.touched_at FROM bound AS b), (SELECT b.endpoint FROM bound AS b),
          (SELECT b.concurrency_key FROM bound AS b))
  AND c.touched_at < CAST(:cutoff AS TIMESTAMPTZ)
  AND NOT EXISTS (
      SELECT 1 FROM executions AS x
      WHERE x.endpoint = c.endpoint AND x.concurrency_key = c.concurrency_key
        AND x.status IN ('PENDING', 'QUEUED', 'RUNNING', 'RETRYING')
      LIMIT 1
  )
