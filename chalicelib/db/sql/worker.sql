-- Worker statements: claim a batch, finalize a batch, read configs and secrets.
-- "/*region_filter*/ TRUE" is the RegionFilter hook (chalicelib.db.queries.regional).

-- part: worker_claim_due
-- The due candidates of both claim strategies, oldest first, on idx_executions_due
-- (run_at order, partial: only QUEUED/RETRYING rows that are not parked and not waiting
-- behind their ordering key's head, so the claim reads :batch rows and stops, whatever the
-- terminal history, the due backlog, a paused endpoint's backlog or a hung key's: migrations
-- 004, 018 and 031 say why). Endpoints whose share of this
-- worker is full (:full) are passed over. At most :batch, the worker's free delivery slots.
--
-- The claim statements are planned once per connection, not per call: the worker's
-- PostgreSQL session runs with plan_cache_mode = force_generic_plan (chalicelib/wiring/
-- process.py), and each of them is written so that a plan made without the values reads
-- what the one made with them does (tests/integration/worker/test_claim_plans.py). Here,
-- "endpoint || ''" keeps the column's statistics out of the estimate: with one endpoint
-- holding every due row, "endpoint <> ALL(<unknown>)" would be estimated to keep none, and
-- a plan made for no rows sorts the table instead of walking the index.
--
-- While an endpoint is at its cap on this worker (the lines tagged "if capped" are kept only
-- then: chalicelib/db/shapes.py cuts the statement to one shape or the other), its due rows
-- are not passed over one by one: a hung or lone busy endpoint's backlog sits at the head
-- of idx_executions_due, and the walk read all of it, with a heap fetch per row, on every
-- claim that looked past it (the reserve's, the other endpoints'). Instead each endpoint
-- that may take work gives its oldest due row (its head: one probe of
-- idx_executions_due_by_endpoint, keyed (parked, endpoint, run_at), migration 021: equal on
-- parked and endpoint, bounded and ordered by run_at, as metrics.sql's lag probes); only
-- the :batch endpoints with the oldest heads can hold the :batch oldest rows, and none of
-- those rows is later than the last of those heads once there are :batch of them (that
-- many rows are no later). So each of those endpoints gives
-- its rows from its head to that bound, at most :batch; the oldest :batch of them are the
-- candidates, and the walk's conditions are checked again on their rows (primary key
-- probes). Such a claim reads a row per endpoint and about a batch more, never a backlog,
-- nor a batch from every endpoint (10,000 rows at 200 endpoints and 50 slots: 13 ms).
SELECT execution_id, endpoint, run_at
FROM executions
WHERE status IN ('QUEUED', 'RETRYING')
  AND NOT parked
  AND NOT ordering_wait
  AND run_at <= now()
  AND endpoint || '' <> ALL(CAST(:full AS TEXT[]))
  AND execution_id = ANY(ARRAY(                                                           -- if capped
      SELECT d.execution_id                                                               -- if capped
      FROM (                                                                              -- if capped
          SELECT h.name, h.run_at,                                                        -- if capped
                 CASE WHEN count(*) OVER () >= CAST(:batch AS BIGINT) THEN max(h.run_at) OVER () -- if capped
                      ELSE now() END AS bound                                             -- if capped
          FROM (                                                                          -- if capped
              SELECT en.name, head.run_at                                                 -- if capped
              FROM endpoints AS en                                                        -- if capped
              CROSS JOIN LATERAL (                                                        -- if capped
                  SELECT c.run_at                                                         -- if capped
                  FROM executions AS c                                                    -- if capped
                  WHERE c.status IN ('QUEUED', 'RETRYING') AND NOT c.ordering_wait        -- if capped
                    AND NOT c.parked AND c.endpoint = en.name AND c.run_at <= now()       -- if capped
                  ORDER BY c.parked ASC, c.endpoint ASC, c.run_at ASC                     -- if capped
                  LIMIT 1                                                                 -- if capped
              ) AS head                                                                   -- if capped
              WHERE en.name <> ALL(CAST(:full AS TEXT[]))                                 -- if capped
                AND en.paused_at IS NULL AND en.deleted_at IS NULL                        -- if capped
              ORDER BY head.run_at ASC                                                    -- if capped
              LIMIT :batch                                                                -- if capped
          ) AS h                                                                          -- if capped
      ) AS top                                                                            -- if capped
      CROSS JOIN LATERAL (                                                                -- if capped
          SELECT c.execution_id, c.run_at                                                 -- if capped
          FROM executions AS c                                                            -- if capped
          WHERE c.status IN ('QUEUED', 'RETRYING') AND NOT c.ordering_wait                -- if capped
            AND NOT c.parked AND c.endpoint = top.name                                    -- if capped
            AND c.run_at >= top.run_at AND c.run_at <= top.bound                          -- if capped
          ORDER BY c.parked ASC, c.endpoint ASC, c.run_at ASC                             -- if capped
          LIMIT :batch                                                                    -- if capped
      ) AS d                                                                              -- if capped
      ORDER BY d.run_at ASC                                                               -- if capped
      LIMIT :batch                                                                        -- if capped
  ))                                                                                      -- if capped
  AND /*region_filter*/ TRUE
ORDER BY run_at ASC
LIMIT :batch

-- part: worker_claim_fair_share
-- Per-endpoint fairness, shared by both claim strategies (after their "picked" CTE of due
-- candidates, oldest first; the including statement writes the commas around it): "fair"
-- keeps, per endpoint, only as many candidates as its cap (spec.max_concurrent of the live
-- endpoint, else :default_cap) minus what this worker is delivering for it (:busy, a JSONB
-- object endpoint -> count) and minus the room of this worker's other claims still in
-- flight (:pending: whatever endpoint they take it from, so claims side by side never take
-- more than a cap between them), so a hung endpoint's backlog cannot hide what is behind it.
-- The same join passes over endpoints that are paused, held by a Retry-After, or
-- flow-controlled (those are claimed by worker_claim_metered only). The worker passes the
-- ones it knows of in :full too (worker_controlled_endpoints, once per poll), so they do
-- not fill the LIMIT; this check is what makes a pause or hold committed before the claim
-- started binding on every worker at once, however old the worker's list.
ranked AS (
    SELECT execution_id, endpoint,
           row_number() OVER (PARTITION BY endpoint ORDER BY run_at ASC) AS rank
    FROM picked
), fair AS (
    SELECT r.execution_id
    FROM ranked AS r
    LEFT JOIN LATERAL (  -- LIMIT 1: one probe of the primary key per candidate, never a join
        SELECT * FROM endpoints AS x WHERE x.name = r.endpoint LIMIT 1
    ) AS en ON TRUE
    WHERE r.rank <= COALESCE(CAST(en.spec ->> 'max_concurrent' AS BIGINT),
                             CAST(:default_cap AS BIGINT))
                    - COALESCE(CAST(CAST(:busy AS JSONB) ->> r.endpoint AS BIGINT), 0)
                    - CAST(:pending AS BIGINT)
      AND en.paused_at IS NULL
      AND (en.held_until IS NULL OR en.held_until <= now())
      AND en.flow_control IS NULL
)

-- part: worker_claim_take
-- The claim itself, shared by both strategies (after their "fair" CTE of ids to take):
-- a compare-and-set on status moves each row QUEUED/RETRYING -> RUNNING (the transition
-- table's only way in) and only if still due, so a row another worker took since it was
-- read is passed over, never claimed twice. The lease starts now and lasts :lease_ms; the
-- worker renews it while it holds the execution (worker_renew_leases). The job's endpoint
-- snapshot comes back as text in the same round trip (the worker parses each distinct text
-- once), with the endpoint's own cap (spec.max_concurrent; NULL: the worker's default,
-- which depends on how many endpoints have work: chalicelib/worker/holdings.py). The claim writes no log row: the attempt's one log row,
-- written at finalize, names the worker (a row per claim would be a row and its index
-- entries written per delivery for a line the attempt's row already carries). "follows": whether the execution's end has something to
-- follow it (a callback, its batch's progress): only then does its finalize need a
-- transaction of its own; otherwise it is one statement sent alone. A claimed row is
-- never parked (the metered claim takes parked rows): whatever comes back to QUEUED or
-- RETRYING from RUNNING comes back unparked, and the promoter parks it again if its
-- endpoint is still controlled (migration 018).
claimed AS (
    UPDATE executions AS e
    SET status = 'RUNNING',
        parked = FALSE,
        worker_id = CAST(:worker_id AS TEXT),
        started_at = now(),
        lease_expires_at = now() + CAST(:lease_ms AS BIGINT) * INTERVAL '1 millisecond',
        attempt_count = e.attempt_count + 1
    WHERE e.execution_id = ANY(ARRAY(SELECT execution_id FROM fair))  -- primary key probes
      AND e.status IN ('QUEUED', 'RETRYING')
      AND e.run_at <= now()
      AND NOT e.ordering_wait
    RETURNING e.execution_id, e.job_id, e.endpoint, e.endpoint_type, e.input,
              e.attempt_count, e.max_attempts, e.config_snapshot,
              (e.on_success IS NOT NULL OR e.on_failure IS NOT NULL
               OR e.batch_id IS NOT NULL OR e.ordering_key IS NOT NULL
               OR e.concurrency_key IS NOT NULL) AS follows,
              e.run_at, e.first_started_at, e.endpoint_version
)

-- part: worker_claim_rows
-- What a claim returns (after the claimed CTE of worker_claim_take): each claimed execution
-- with its job's endpoint snapshot (the endpoint as it is now when a retry asked for its
-- current definition: endpoint_version), its endpoint's cap, the job's own headers and
-- trace context (migration 023) and its own delivery settings (delivery_overrides:
-- migration 025), all NULL for most jobs and read on the same probe of the job. Two
-- numbers for the worker's deadlines, in the database's clock and only where they apply:
-- late_ms, how long after its due time a first attempt of a job with expire_after starts
-- (the worker does not send it once too late), and retry_elapsed_ms, how long ago a
-- retried execution's first attempt started (max_retry_duration_ms).
SELECT c.execution_id, c.job_id, c.endpoint, c.endpoint_type, c.input, c.attempt_count,
       c.max_attempts, c.config_snapshot, c.follows,
       CAST(COALESCE(CASE WHEN c.endpoint_version = 'current' THEN NULL
                          ELSE j.endpoint_snapshot END, jsonb_build_object(
           'name', en.name, 'type', en.endpoint_type, 'spec', en.spec,
           'retry_policy', en.retry_policy, 'config_ref', en.config_ref,
           'payload_spec_ref', en.payload_spec_ref)) AS TEXT) AS endpoint_snapshot,
       CAST(en.spec ->> 'max_concurrent' AS BIGINT) AS endpoint_cap,
       j.headers AS job_headers, j.traceparent, j.tracestate, j.delivery_overrides,
       CASE WHEN c.attempt_count = 1 AND j.delivery_overrides -> 'expire_after_ms' IS NOT NULL
            THEN CAST(EXTRACT(EPOCH FROM (now() - c.run_at)) * 1000 AS BIGINT) END AS late_ms,
       CAST(EXTRACT(EPOCH FROM (now() - c.first_started_at)) * 1000 AS BIGINT)
           AS retry_elapsed_ms
FROM claimed AS c
LEFT JOIN LATERAL (  -- LIMIT 1 as in "fair": a key probe per claimed row
    SELECT x.endpoint_snapshot, x.headers, x.traceparent, x.tracestate, x.delivery_overrides
    FROM jobs AS x WHERE x.job_id = c.job_id LIMIT 1
) AS j ON TRUE
LEFT JOIN LATERAL (
    SELECT * FROM endpoints AS x WHERE x.name = c.endpoint LIMIT 1
) AS en ON TRUE

-- name: worker_claim_skip_locked
-- PostgreSQL claim, one statement: takes up to :batch due executions, :batch being the
-- worker's free delivery slots (a worker never claims more than it can start at once, so
-- what it holds RUNNING is in delivery and what it cannot start stays QUEUED, cancellable
-- and free for another worker). FOR UPDATE SKIP LOCKED makes concurrent workers pass over
-- rows another worker is claiming instead of queueing behind its lock, so N workers claim N
-- disjoint batches without blocking each other. The candidates are a MATERIALIZED CTE
-- rather than "WHERE id IN (SELECT ... LIMIT)": the planner may re-run an IN-subquery and
-- overrun LIMIT; a materialized CTE runs exactly once. Locked candidates that the fair
-- share does not keep are released at commit.
WITH picked AS MATERIALIZED (
-- include: worker_claim_due
    FOR UPDATE SKIP LOCKED
),
-- include: worker_claim_fair_share
,
-- include: worker_claim_take
-- include: worker_claim_rows

-- name: worker_claim_candidates
-- CockroachDB claim, step 1: read due ids without locking. CockroachDB's SKIP LOCKED has
-- open issues under contention, so candidates are read plainly on idx_executions_due
-- and step 2 (worker_claim_conditional) decides ownership. The same per-endpoint fairness
-- as worker_claim_skip_locked: full endpoints passed over, the rest cut to their share.
WITH picked AS (
-- include: worker_claim_due
),
-- include: worker_claim_fair_share
SELECT execution_id FROM fair

-- name: worker_claim_conditional
-- CockroachDB claim, step 2: the shared compare-and-set take of the candidates (:ids).
-- When two workers pick the same ids, the status guard lets only one of them move each row
-- (the other gets fewer rows, or a 40001 that the transaction helper retries with fresh
-- candidates), so no execution is ever claimed twice.
WITH fair AS (
    SELECT unnest(CAST(:ids AS TEXT[])) AS execution_id
),
-- include: worker_claim_take
-- include: worker_claim_rows

-- name: worker_claim_metered
-- The claim of flow-controlled endpoints (:names, sorted), both strategies, run after
-- worker_flow_refill in the same transaction: that statement holds the endpoints'
-- endpoint_flow rows locked, so the metered claims of one endpoint run one at a time across
-- all workers, and this statement (a new snapshot at READ COMMITTED, taken after the lock
-- was granted) sees every execution an earlier holder moved to RUNNING. Per endpoint it
-- takes at most (allowance):
--   * what the rate limit granted (:allow, endpoint -> whole tokens; absent: no rate
--     limit), debited after this statement by worker_flow_debit;
--   * flow_control.max_concurrency minus its RUNNING executions on every worker (RUNNING
--     covers claimed-not-yet-sent, so the target never sees more sends at once);
--   * this worker's share (spec.max_concurrent or :default_cap, minus :busy and
--     :pending), as the fast path does.
-- Paused and held endpoints get nothing, nor does one without its endpoint_flow row (no
-- lock, no limit: never claimed unlimited). The due rows come from
-- idx_executions_due_by_endpoint, two ranges per endpoint (side: its rows not parked yet
-- and its parked ones, which are most of a flow-controlled backlog: migration 018), each
-- oldest first and at most :batch (a constant LIMIT, which CockroachDB accepts in a
-- LATERAL subquery where a correlated one is doubtful), cut to the allowance by rank, then
-- to :batch by run_at, and the take is the fast path's compare-and-set, without SKIP
-- LOCKED: only this (serialized) claim takes these endpoints' executions. flow is
-- MATERIALIZED so that each endpoint's allowance (with its count of RUNNING rows) is
-- computed once: inlined, the generic plan the worker keeps computed it again for every
-- due row of the endpoint (a batch times its RUNNING rows; a plan test caught it).
WITH flow AS MATERIALIZED (
    SELECT en.name,
           LEAST(
               COALESCE(CAST(CAST(:allow AS JSONB) ->> en.name AS BIGINT), CAST(:batch AS BIGINT)),
               COALESCE(CAST(en.flow_control ->> 'max_concurrency' AS BIGINT)
                        - (SELECT count(*) FROM executions AS x
                           WHERE x.status = 'RUNNING' AND x.endpoint = en.name),
                        CAST(:batch AS BIGINT)),
               COALESCE(CAST(en.spec ->> 'max_concurrent' AS BIGINT),
                        CAST(:default_cap AS BIGINT))
               - COALESCE(CAST(CAST(:busy AS JSONB) ->> en.name AS BIGINT), 0)
               - CAST(:pending AS BIGINT)
           ) AS allowance
    FROM endpoints AS en
    JOIN endpoint_flow AS locked ON locked.endpoint = en.name
    WHERE en.name = ANY(CAST(:names AS TEXT[]))
      AND en.flow_control IS NOT NULL
      AND en.paused_at IS NULL
      AND (en.held_until IS NULL OR en.held_until <= now())
), due AS (
    SELECT d.execution_id, d.run_at, f.allowance,
           row_number() OVER (PARTITION BY f.name ORDER BY d.run_at ASC) AS rank
    FROM flow AS f
    CROSS JOIN (VALUES (FALSE), (TRUE)) AS side (parked)
    CROSS JOIN LATERAL (
        SELECT x.execution_id, x.run_at
        FROM executions AS x
        WHERE x.endpoint = f.name
          AND x.parked = side.parked
          AND x.status IN ('QUEUED', 'RETRYING')
          AND NOT x.ordering_wait
          AND x.run_at <= now()
        ORDER BY x.parked ASC, x.run_at ASC
        LIMIT :batch
    ) AS d
    WHERE f.allowance > 0
), fair AS (
    SELECT execution_id FROM due WHERE rank <= allowance ORDER BY run_at ASC LIMIT :batch
),
-- include: worker_claim_take
-- include: worker_claim_rows

-- name: worker_flow_refill
-- First statement of a metered claim: locks the endpoint_flow rows of the flow-controlled
-- endpoints (:names, sorted, so two workers lock them in the same order; a deadlock would
-- still only be retried) until the claim commits, and refills each rate limit's token
-- bucket for the time since its last refill: limit/period_ms per millisecond, never more
-- than limit held. clock_timestamp(), evaluated once the lock is held, rather than now()
-- (the transaction's start, possibly before a wait for the lock); GREATEST keeps time from
-- running backwards between holders. Returns the tokens now available.
UPDATE endpoint_flow AS f
SET tokens = CASE
        WHEN en.flow_control -> 'rate_limit' IS NULL THEN 0
        ELSE LEAST(
            CAST(en.flow_control -> 'rate_limit' ->> 'limit' AS FLOAT8),
            f.tokens + GREATEST(CAST(0 AS FLOAT8), CAST(EXTRACT(EPOCH FROM (
                clock_timestamp() - f.refilled_at)) AS FLOAT8) * 1000)
                * CAST(en.flow_control -> 'rate_limit' ->> 'limit' AS FLOAT8)
                / CAST(en.flow_control -> 'rate_limit' ->> 'period_ms' AS FLOAT8))
    END,
    refilled_at = GREATEST(f.refilled_at, clock_timestamp())
FROM endpoints AS en
WHERE f.endpoint = ANY(CAST(:names AS TEXT[]))
  AND en.name = f.endpoint
RETURNING f.endpoint, f.tokens, en.flow_control -> 'rate_limit' IS NOT NULL AS rate_limited

-- name: worker_flow_debit
-- Last statement of a metered claim: the rate-limited endpoints' buckets lose what the claim
-- took (:taken, endpoint -> count; never more than worker_flow_refill granted), under the
-- lock that statement took. Debited per claim, not per delivery.
UPDATE endpoint_flow AS f
SET tokens = f.tokens - CAST(t.value AS FLOAT8)
FROM jsonb_each_text(CAST(:taken AS JSONB)) AS t
WHERE f.endpoint = t.key

-- name: worker_controlled_endpoints
-- Read by each worker once per poll interval (not per claim or delivery): the endpoints it
-- must keep out of the fast claim's LIMIT (:full): paused, held, or flow-controlled, the
-- last ones served by its metered claim ("metered"). The first condition is
-- idx_endpoints_controlled's predicate (only such endpoints are in it); the second drops
-- holds that have expired.
SELECT name,
       (flow_control IS NOT NULL) AS metered
FROM endpoints
WHERE (paused_at IS NOT NULL OR held_until IS NOT NULL OR flow_control IS NOT NULL)
  AND (paused_at IS NOT NULL OR held_until > now() OR flow_control IS NOT NULL)
  AND deleted_at IS NULL
ORDER BY name

-- name: worker_hold_endpoints
-- A 429 or 503 with Retry-After holds the whole endpoint back, not only the execution that
-- got it: held_until moves to now + the delay (:holds, endpoint -> ms, capped by the
-- worker), never backwards (GREATEST: a shorter answer does not shorten a longer hold).
-- Claims pass over a held endpoint until then. Run by the finalize transaction only when a
-- batch carries such an answer.
UPDATE endpoints AS en
SET held_until = GREATEST(COALESCE(en.held_until, now()),
                          now() + CAST(h.value AS BIGINT) * INTERVAL '1 millisecond')
FROM jsonb_each_text(CAST(:holds AS JSONB)) AS h
WHERE en.name = h.key

-- name: worker_renew_leases
-- Lease renewal, in batches: one statement per renewal round extends the leases of every
-- execution this worker still holds and has held for a third of a lease, so a delivery may
-- take its whole timeout_ms (up to the lease itself, or longer) without being reclaimed,
-- while a dead worker's executions expire one lease after its last renewal. The guards
-- (RUNNING, this worker) skip executions the reclaimer took back: those are missing from
-- the result, and the worker does not send them.
UPDATE executions
SET lease_expires_at = now() + CAST(:lease_ms AS BIGINT) * INTERVAL '1 millisecond'
WHERE execution_id = ANY(CAST(:ids AS TEXT[]))
  AND status = 'RUNNING'
  AND worker_id = CAST(:worker_id AS TEXT)
RETURNING execution_id

-- part: worker_finalize_record
-- The record of a finalize batch (its CTEs, for worker_finalize_batch and
-- worker_record_and_claim; the including statement writes WITH before them): "done" reads
-- the results, "moved" moves each execution on, "attempted" writes its attempt, "counted"
-- adds them to this writer's summary rows. What that means is worker_finalize_batch's
-- comment.
done AS (
    SELECT r ->> 'execution_id' AS execution_id,
           CAST(r ->> 'attempt_number' AS BIGINT) AS attempt_number,
           r ->> 'attempt_status' AS attempt_status,
           r ->> 'next_status' AS next_status,
           CAST(r ->> 'started_at' AS TIMESTAMPTZ) AS started_at,
           CAST(r ->> 'completed_at' AS TIMESTAMPTZ) AS completed_at,
           CAST(r ->> 'duration_ms' AS BIGINT) AS duration_ms,
           r -> 'output' AS output,
           r -> 'error' AS error,
           CAST(r ->> 'retry_delay_ms' AS BIGINT) AS retry_delay_ms,
           r -> 'config_snapshot' AS config_snapshot,
           r ->> 'log_level' AS log_level,
           r ->> 'log_message' AS log_message
    FROM jsonb_array_elements(CAST(:results AS JSONB)) AS r
), moved AS (
    UPDATE executions AS e
    SET status = d.next_status,
        output = CASE WHEN d.next_status = 'SUCCESS' THEN d.output ELSE e.output END,
        completed_at = CASE WHEN d.next_status IN ('SUCCESS', 'FAILED')
                            THEN d.completed_at ELSE e.completed_at END,
        duration_ms = CASE WHEN d.next_status IN ('SUCCESS', 'FAILED')
                           THEN d.duration_ms ELSE e.duration_ms END,
        run_at = CASE WHEN d.next_status = 'RETRYING'
                      THEN now() + d.retry_delay_ms * INTERVAL '1 millisecond'
                      ELSE e.run_at END,
        worker_id = CASE WHEN d.next_status = 'RETRYING' THEN NULL ELSE e.worker_id END,
        config_snapshot = COALESCE(e.config_snapshot, d.config_snapshot),
        last_error_type = CASE WHEN d.attempt_status = 'FAILED' THEN d.error ->> 'type' END,
        first_started_at = CASE WHEN d.next_status = 'RETRYING'
                                THEN COALESCE(e.first_started_at, e.started_at)
                                ELSE e.first_started_at END
    FROM done AS d
    WHERE e.execution_id = d.execution_id
      AND e.status = 'RUNNING'
      AND e.worker_id = CAST(:worker_id AS TEXT)
      AND e.attempt_count = d.attempt_number
    RETURNING e.execution_id, e.status, e.endpoint, e.on_success, e.on_failure, e.batch_id,
              e.ordering_key, e.concurrency_key
), attempted AS (
    INSERT INTO attempts (execution_id, attempt_number, status, started_at, completed_at,
                          duration_ms, output, error, log_level, log_message)
    SELECT d.execution_id, d.attempt_number, d.attempt_status, d.started_at, d.completed_at,
           d.duration_ms, d.output, d.error, d.log_level,
           d.log_message || ' [worker ' || CAST(:worker_id AS TEXT) || ']'
    FROM done AS d
    JOIN moved AS m ON m.execution_id = d.execution_id
    ON CONFLICT (execution_id, attempt_number) DO NOTHING
), additions AS (
    SELECT 'minute' AS grain, date_trunc('minute', now()) AS bucket_start, m.endpoint,
           d.attempt_status AS outcome, COALESCE(d.error ->> 'type', '') AS error_type,
           CAST(:writer AS TEXT) AS writer,
           count(*) AS attempts,
           sum(CASE WHEN m.status IN ('SUCCESS', 'FAILED') THEN 1 ELSE 0 END) AS ended,
           COALESCE(sum(d.duration_ms), 0) AS duration_ms,
           sum(CASE WHEN d.duration_ms <= 10 THEN 1 ELSE 0 END) AS le_10,
           sum(CASE WHEN d.duration_ms <= 50 THEN 1 ELSE 0 END) AS le_50,
           sum(CASE WHEN d.duration_ms <= 100 THEN 1 ELSE 0 END) AS le_100,
           sum(CASE WHEN d.duration_ms <= 250 THEN 1 ELSE 0 END) AS le_250,
           sum(CASE WHEN d.duration_ms <= 500 THEN 1 ELSE 0 END) AS le_500,
           sum(CASE WHEN d.duration_ms <= 1000 THEN 1 ELSE 0 END) AS le_1000,
           sum(CASE WHEN d.duration_ms <= 5000 THEN 1 ELSE 0 END) AS le_5000,
           sum(CASE WHEN d.duration_ms <= 30000 THEN 1 ELSE 0 END) AS le_30000
    FROM done AS d
    JOIN moved AS m ON m.execution_id = d.execution_id
    GROUP BY m.endpoint, d.attempt_status, COALESCE(d.error ->> 'type', '')
), counted AS (
-- include: delivery_counts_add
)

-- name: worker_finalize_batch
-- Records the attempts of many finished executions and moves them on, in one statement:
-- one durable commit finalizes a whole batch, which is what lets throughput exceed the
-- commits/s the database can make. Rows come in as one JSONB array (jsonb_array_elements
-- works on PostgreSQL and CockroachDB alike). The UPDATE is a compare-and-set on
-- (RUNNING, worker_id, attempt_count): if the reclaimer took the execution back, or another
-- worker has claimed it since, this late result changes nothing and records nothing.
-- config_snapshot is kept from the first attempt that stored one; last_error_type is the
-- error type of this attempt (NULL when it succeeded), what GET /executions?error_type=
-- filters on (migration 014). An execution scheduled to retry keeps when its first attempt
-- started (first_started_at, the claim's started_at of that attempt: migration 025).
-- The attempt's log line ("Attempt 2 failed (...); attempt 3 of 5 scheduled in 800 ms [worker w]") is written on
-- its attempts row, not as an execution_logs row of its own (migration 013 says why);
-- executions_logs_page lists both. The batch's attempts are also added to the summary
-- rows of this writer (:writer, one finalizer thread of one worker: no other transaction
-- updates them) for the current minute, one per endpoint, outcome and error type, which
-- GET /overview and GET /metrics read instead of the history (migration 017).
-- For an execution that ended, each row also says what follows it, read from the row being
-- updated (the execution's copies of its job's callbacks and batch): "callback" (the
-- endpoint to call back) and "batch_id". Only when one is set does the finalizer run the
-- follow-up statements (chalicelib/services/callbacks.py) in this transaction, so a job
-- without callbacks or batch costs nothing more. They are separate statements because
-- CockroachDB refuses a statement that modifies one table (executions) twice.
WITH
-- include: worker_finalize_record
SELECT execution_id,
       CASE WHEN status = 'SUCCESS' THEN on_success
            WHEN status = 'FAILED' THEN on_failure END AS callback,
       CASE WHEN status IN ('SUCCESS', 'FAILED') THEN batch_id END AS batch_id,
       CASE WHEN status IN ('SUCCESS', 'FAILED') THEN ordering_key END AS ordering_key,
       CASE WHEN status IN ('SUCCESS', 'FAILED') THEN concurrency_key END AS concurrency_key
FROM moved

-- name: worker_record_and_claim
-- PostgreSQL's finalize of a batch nothing follows (no callback, no batch, no Retry-After)
-- and the claim into the slots it frees, in one statement and one commit: the ring's
-- "record and refill" (chalicelib/worker/worker.py). The record is worker_finalize_batch's,
-- the claim worker_claim_skip_locked's, each unchanged: the claim's snapshot is the
-- statement's, in which the recorded executions are still RUNNING, so it can neither take
-- one of them nor see a retry they schedule; they touch different rows, which PostgreSQL
-- allows in one statement (CockroachDB does not: its configuration records and claims in
-- two). Rows: "claimed" ones (the claim's columns) and a "recorded" one per execution the
-- record moved on.
WITH
-- include: worker_finalize_record
, picked AS MATERIALIZED (
-- include: worker_claim_due
    FOR UPDATE SKIP LOCKED
),
-- include: worker_claim_fair_share
,
-- include: worker_claim_take
SELECT 'claimed' AS kind, r.*
FROM (
-- include: worker_claim_rows
) AS r
UNION ALL
SELECT 'recorded', m.execution_id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       NULL, NULL, NULL, NULL, NULL, NULL
FROM moved AS m

-- name: worker_config_values
-- Config cache miss: the current values (the first attempt snapshots them).
SELECT values_json FROM configs WHERE name = :name

-- name: worker_secret_values
-- Secret cache misses, all in one read; decrypted in the worker, never logged. The
-- previous value and its rotation time come along, for signing during a rotation window.
SELECT name, encrypted_value, previous_encrypted_value, rotated_at
FROM secrets WHERE name = ANY(CAST(:names AS TEXT[]))

-- name: worker_read_committed
-- First statement of the worker's transactions of more than one statement: a finalize that
-- something follows (and the refill claim inside it) and the metered claim. The claim, the
-- lease renewal and a finalize nothing follows are sent alone instead, in the worker pool's
-- READ COMMITTED session (ISOLATION in chalicelib/wiring/process.py). Each rests on row
-- locks and compare-and-set guards (SKIP LOCKED, "status IN (...)", "status = 'RUNNING'
-- AND worker_id AND attempt_count"), which PostgreSQL re-checks on the latest row version under READ
-- COMMITTED. At SERIALIZABLE the claim's range read of the due index and the finalizer's
-- writes to recently claimed rows abort each other (40001) for no benefit. CockroachDB runs
-- it as READ COMMITTED where enabled and upgrades it to SERIALIZABLE otherwise; both are
-- correct, the helper retries 40001 either way.
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- part: delivery_counts_add
-- Adds the rows of the including statement's "additions" CTE (delivery_counts' columns,
-- in order, at most one row per key) to the summary rows: a new key is inserted, an
-- existing one has each count increased (migration 017).
INSERT INTO delivery_counts AS c (grain, bucket_start, endpoint, outcome, error_type, writer,
                                  attempts, ended, duration_ms, le_10, le_50, le_100,
                                  le_250, le_500, le_1000, le_5000, le_30000)
SELECT grain, bucket_start, endpoint, outcome, error_type, writer, attempts, ended,
       duration_ms, le_10, le_50, le_100, le_250, le_500, le_1000, le_5000, le_30000
FROM additions
ON CONFLICT (grain, bucket_start, endpoint, outcome, error_type, writer) DO UPDATE
SET attempts = c.attempts + excluded.attempts,
    ended = c.ended + excluded.ended,
    duration_ms = c.duration_ms + excluded.duration_ms,
    le_10 = c.le_10 + excluded.le_10,
    le_50 = c.le_50 + excluded.le_50,
    le_100 = c.le_100 + excluded.le_100,
    le_250 = c.le_250 + excluded.le_250,
    le_500 = c.le_500 + excluded.le_500,
    le_1000 = c.le_1000 + excluded.le_1000,
    le_5000 = c.le_5000 + excluded.le_5000,
    le_30000 = c.le_30000 + excluded.le_30000
