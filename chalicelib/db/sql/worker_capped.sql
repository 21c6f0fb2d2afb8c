-- The worker's claims while an endpoint is at its cap on this worker (ClaimLimits.full:
-- chalicelib/worker/strategies.py picks these statements by name then, worker.sql's
-- otherwise). They are worker.sql's claims with one condition more on their walk: only the
-- rows "heads" found.

-- part: heads
-- While an endpoint is at its cap on this worker, its due rows are not passed over one by
-- one: a hung or lone busy endpoint's backlog sits at the head of idx_executions_due, and
-- the walk read all of it, with a heap fetch per row, on every claim that looked past it
-- (the reserve's, the other endpoints'). Instead each endpoint that may take work gives its
-- oldest due row (its head: one probe of idx_executions_due_by_endpoint, keyed (parked,
-- endpoint, run_at), migration 021: equal on parked and endpoint, bounded and ordered by
-- run_at, as metrics.sql's lag probes); only the :batch endpoints with the oldest heads can
-- hold the :batch oldest rows, and none of those rows is later than the last of those
-- heads once there are :batch of them (that many rows are no later). So each of those
-- endpoints gives its rows from its head to that bound, at most :batch; the oldest :batch
-- of them are the candidates, and the walk's conditions are checked again on their rows
-- (primary key probes). Such a claim reads a row per endpoint and about a batch more, never
-- a backlog, nor a batch from every endpoint (10,000 rows at 200 endpoints and 50 slots:
-- 13 ms).
heads AS (
    SELECT d.execution_id
    FROM (
        SELECT h.name, h.run_at,
               CASE WHEN count(*) OVER () >= CAST(:batch AS BIGINT) THEN max(h.run_at) OVER ()
                    ELSE now() END AS bound
        FROM (
            SELECT en.name, head.run_at
            FROM endpoints AS en
            CROSS JOIN LATERAL (
                SELECT c.run_at
                FROM executions AS c
                WHERE c.status IN ('QUEUED', 'RETRYING') AND NOT c.ordering_wait
                  AND NOT c.parked AND c.endpoint = en.name AND c.run_at <= now()
                ORDER BY c.parked ASC, c.endpoint ASC, c.run_at ASC
                LIMIT 1
            ) AS head
            WHERE en.name <> ALL(CAST(:full AS TEXT[]))
              AND en.paused_at IS NULL AND en.deleted_at IS NULL
            ORDER BY head.run_at ASC
            LIMIT :batch
        ) AS h
    ) AS top
    CROSS JOIN LATERAL (
        SELECT c.execution_id, c.run_at
        FROM executions AS c
        WHERE c.status IN ('QUEUED', 'RETRYING') AND NOT c.ordering_wait
          AND NOT c.parked AND c.endpoint = top.name
          AND c.run_at >= top.run_at AND c.run_at <= top.bound
        ORDER BY c.parked ASC, c.endpoint ASC, c.run_at ASC
        LIMIT :batch
    ) AS d
    ORDER BY d.run_at ASC
    LIMIT :batch
)

-- part: picked
-- worker.sql's "picked" (the locked walk, whose comment says why it is shaped so) kept to
-- the rows of "heads".
picked AS MATERIALIZED (
    SELECT execution_id, endpoint, run_at
    FROM executions
    WHERE status IN ('QUEUED', 'RETRYING')
      AND NOT parked
      AND NOT ordering_wait
      AND run_at <= now()
      AND endpoint || '' <> ALL(CAST(:full AS TEXT[]))
      AND execution_id = ANY(ARRAY(SELECT execution_id FROM heads))
      AND /*region_filter*/ TRUE
    ORDER BY run_at ASC
    LIMIT :batch
    FOR UPDATE SKIP LOCKED
)

-- name: worker_claim_skip_locked_capped
-- worker_claim_skip_locked while an endpoint is at its cap on this worker.
WITH
-- include: heads
, -- include: picked
, -- include: ranked
, -- include: fair
, -- include: claimed
, -- include: claim_rows
SELECT * FROM claim_rows

-- name: worker_claim_candidates_capped
-- worker_claim_candidates while an endpoint is at its cap on this worker: its walk without
-- the lock, kept to the rows of "heads".
WITH
-- include: heads
, picked AS (
    SELECT execution_id, endpoint, run_at
    FROM executions
    WHERE status IN ('QUEUED', 'RETRYING')
      AND NOT parked
      AND NOT ordering_wait
      AND run_at <= now()
      AND endpoint || '' <> ALL(CAST(:full AS TEXT[]))
      AND execution_id = ANY(ARRAY(SELECT execution_id FROM heads))
      AND /*region_filter*/ TRUE
    ORDER BY run_at ASC
    LIMIT :batch
)
, -- include: ranked
, -- include: fair
SELECT execution_id FROM fair

-- name: worker_record_and_claim_capped
-- worker_record_and_claim while an endpoint is at its cap on this worker.
WITH
-- include: done
, -- include: moved
, -- include: attempted
, -- include: additions
, -- include: counted
, -- include: heads
, -- include: picked
, -- include: ranked
, -- include: fair
, -- include: claimed
, -- include: claim_rows
, -- include: record_and_claim_rows
SELECT * FROM record_and_claim_rows
