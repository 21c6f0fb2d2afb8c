-- Worker statements: claim a batch, finalize a batch, read configs and secrets.
-- "/*region_filter*/ TRUE" is the RegionFilter hook (chalicelib.db.queries.regional).
-- The claims while an endpoint is at its cap on this worker are worker_capped.sql's; the
-- CTEs both files' claims share are parts.sql's (ranked, fair, claimed, claim_rows, and
-- the finalize's record).

-- part: picked
-- The due candidates of the PostgreSQL claims, oldest first, on idx_executions_due
-- (run_at order, partial: only QUEUED/RETRYING rows that are not parked and not waiting
-- behind their ordering key's head, so the claim reads :batch rows and stops, whatever the
-- terminal history, the due backlog, a paused endpoint's backlog or a hung key's: migrations
-- 004, 018 and 031 say why). Endpoints whose share of this
-- worker is full (:full) are passed over. At most :batch, the worker's free delivery slots.
-- worker_claim_candidates walks the same rows without the lock (a CTE cannot be locked from
-- outside it, so each strategy writes its walk: tests/unit/test_sql_contracts.py checks
-- that the walks agree).
--
-- The claim statements are planned once per connection, not per call: the worker's
-- PostgreSQL session runs with plan_cache_mode = force_generic_plan (chalicelib/wiring/
-- process.py), and each of them is written so that a plan made without the values reads
-- what the one made with them does (tests/integration/worker/test_claim_plans.py). Here,
-- "endpoint || ''" keeps the column's statistics out of the estimate: with one endpoint
-- holding every due row, "endpoint <> ALL(<unknown>)" would be estimated to keep none, and
-- a plan made for no rows sorts the table instead of walking the index.
--
-- FOR UPDATE SKIP LOCKED makes concurrent workers pass over rows another worker is
-- claiming instead of queueing behind its lock, so N workers claim N disjoint batches
-- without blocking each other. The candidates are a MATERIALIZED CTE rather than "WHERE id
-- IN (SELECT ... LIMIT)": the planner may re-run an IN-subquery and overrun LIMIT; a
-- materialized CTE runs exactly once. Locked candidates that the fair share does not keep
-- are released at commit.
picked AS MATERIALIZED (
    SELECT execution_id, endpoint, run_at
    FROM executions
    WHERE status IN ('QUEUED', 'RETRYING')
      AND NOT parked
      AND NOT ordering_wait
      AND run_at <= now()
      AND endpoint || '' <> ALL(CAST(:full AS TEXT[]))
      AND /*region_filter*/ TRUE
    ORDER BY run_at ASC
    LIMIT :batch
    FOR UPDATE SKIP LOCKED
)

-- name: worker_claim_skip_locked
-- PostgreSQL claim, one statement: takes up to :batch due executions, :batch being the
-- worker's free delivery slots (a worker never claims more than it can start at once, so
-- what it holds RUNNING is in delivery and what it cannot start stays QUEUED, cancellable
-- and free for another worker). No endpoint is at its cap on this worker (the claim while
-- one is: worker_claim_skip_locked_capped).
WITH
-- include: picked
, -- include: ranked
, -- include: fair
, -- include: claimed
, -- include: claim_rows
SELECT * FROM claim_rows

-- name: worker_claim_candidates
-- CockroachDB claim, step 1: read due ids without locking. CockroachDB's SKIP LOCKED has
-- open issues under contention, so candidates are read plainly on idx_executions_due
-- and step 2 (worker_claim_conditional) decides ownership. The same walk (the part
-- "picked", without its lock) and per-endpoint fairness as worker_claim_skip_locked: full
-- endpoints passed over, the rest cut to their share.
WITH picked AS (
    SELECT execution_id, endpoint, run_at
    FROM executions
    WHERE status IN ('QUEUED', 'RETRYING')
      AND NOT parked
      AND NOT ordering_wait
      AND run_at <= now()
      AND endpoint || '' <> ALL(CAST(:full AS TEXT[]))
      AND /*region_filter*/ TRUE
    ORDER BY run_at ASC
    LIMIT :batch
)
, -- include: ranked
, -- include: fair
SELECT execution_id FROM fair

-- name: worker_claim_conditional
-- CockroachDB claim, step 2: the shared compare-and-set take of the candidates (:ids).
-- When two workers pick the same ids, the status guard lets only one of them move each row
-- (the other gets fewer rows, or a 40001 that the transaction helper retries with fresh
-- candidates), so no execution is ever claimed twice.
WITH fair AS (
    SELECT unnest(CAST(:ids AS TEXT[])) AS execution_id
)
, -- include: claimed
, -- include: claim_rows
SELECT * FROM claim_rows

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
)
, -- include: claimed
, -- include: claim_rows
SELECT * FROM claim_rows

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
-- include: done
, -- include: moved
, -- include: attempted
, -- include: additions
, -- include: counted
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
-- include: done
, -- include: moved
, -- include: attempted
, -- include: additions
, -- include: counted
, -- include: picked
, -- include: ranked
, -- include: fair
, -- include: claimed
, -- include: claim_rows
, -- include: record_and_claim_rows
SELECT * FROM record_and_claim_rows

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
