-- Scheduler loops: cron tick materializer, delayed promoter, stuck reclaimer.
--
-- Every statement is safe with several schedulers running at once (no leader election):
-- each one is guarded so that a second scheduler doing the same work finds nothing to do.
-- The clock is always a parameter (:now, :cutoff), never now(), so tests move time instead
-- of sleeping and every scheduler in a run agrees on one instant per iteration.
-- "/*region_filter*/ TRUE" is the RegionFilter hook: chalicelib.db.queries.regional swaps
-- it for "crdb_region = ANY(:regions)" once a second region exists; today it stays TRUE.

-- name: scheduler_cron_due_jobs
-- The due scan of idx_jobs_cron_due (partial: CRON and ACTIVE only, ordered by
-- cron_next_run_at), so its cost follows the number of due jobs, not the size of jobs.
-- cron_ends_at is deliberately not filtered here: ticks before ends_at that were missed
-- while no scheduler ran are still materialized, and a job whose schedule ended has
-- cron_next_run_at = ends_at (its retirement tick) and must be seen once to be retired.
-- A paused job (POST /jobs/{id}/pause) is passed over: no tick while paused (the index keeps
-- it: pauses are few, and a pause or resume must not move the row in and out of it).
SELECT job_id, cron_expression, cron_timezone, cron_starts_at, cron_ends_at,
       cron_next_run_at
FROM jobs
WHERE trigger_type = 'CRON'
  AND status = 'ACTIVE'
  AND cron_next_run_at <= CAST(:now AS TIMESTAMPTZ)
  AND paused_at IS NULL
  AND /*region_filter*/ TRUE
ORDER BY cron_next_run_at ASC
LIMIT :batch

-- name: scheduler_cron_apply_ticks
-- One tick for each of a batch of jobs, in one statement (hence one transaction and one
-- commit for the whole batch instead of one per job-tick). The plans come as parallel
-- arrays, one element per job (a job appears at most once): the tick it is at, the tick to
-- move to (NULL: the schedule has ended, retire the job), whether to materialize the tick
-- or only move (ends_at reached, or the tick precedes starts_at), its idempotency key and
-- log message.
-- Timestamps and flags travel as TEXT[] (ISO 8601, 'true'/'false') and are cast here: the
-- driver cannot infer an array type from a list that may be all NULLs.
-- 1. locked: the jobs of the batch still ACTIVE, locked in job_id order. SKIP LOCKED: a
--    job another scheduler (or an API retire) is writing right now is left to it; its tick
--    is not lost, the CAS below decides and the next iteration sees the outcome.
-- 2. advanced: the compare-and-set. It moves cron_next_run_at from the plan's tick to its
--    next tick only if the job is still ACTIVE and still at that tick. A second scheduler
--    that read the same tick updates nothing (after a 40001 retry at SERIALIZABLE it
--    reads the new value); a job retired after the due scan updates nothing. A NULL next
--    tick retires the job (RETIRED, retired_at = ends_at) by the same CAS, so of several
--    schedulers exactly one retires it and reports it. A job paused after the due scan
--    updates nothing either (paused_at IS NULL), so a committed pause stops every tick.
-- 3. created: the executions are inserted FROM advanced, so a tick's execution exists only
--    if this statement won that job's CAS: a retired job never ticks again, even when it
--    was retired between the due scan and this statement. ON CONFLICT on the
--    (job_id, idempotency_key) unique index makes a replayed tick a no-op; the key is
--    cron_<job_id>_<epoch_ms>. run_at is the tick, which may still be ahead (look-ahead):
--    the worker's claim requires run_at <= now(), so it never fires early.
--    max_attempts comes from the endpoint as it was when the job was created. The job's
--    callbacks are copied onto each tick (each tick's end calls back, as a one-shot's
--    does); batch_id is not: a batch's progress counts its one-shot executions. A keyed
--    job's tick is created waiting for its key's turn, placed at its tick, and the
--    materializer settles its key in this transaction; the job's concurrency key gates
--    the tick only if its endpoint limits per key now (a primary key probe per tick) (chalicelib/services/keys.py).
-- 4. logged: the QUEUED transition's log row, for the rows that were really inserted.
WITH plan AS (
    SELECT *
    FROM unnest(CAST(:job_ids AS TEXT[]), CAST(CAST(:ticks AS TEXT[]) AS TIMESTAMPTZ[]),
                CAST(CAST(:next_ticks AS TEXT[]) AS TIMESTAMPTZ[]),
                CAST(CAST(:materialize AS TEXT[]) AS BOOLEAN[]),
                CAST(:keys AS TEXT[]), CAST(:messages AS TEXT[]))
        AS p(job_id, tick, next_tick, materialize, idempotency_key, message)
), locked AS (
    SELECT job_id
    FROM jobs
    WHERE job_id = ANY(CAST(:job_ids AS TEXT[]))
      AND status = 'ACTIVE'
    ORDER BY job_id
    FOR UPDATE SKIP LOCKED
), advanced AS (
    UPDATE jobs AS j
    SET cron_next_run_at = p.next_tick,
        cron_last_tick_at = CASE WHEN p.materialize THEN p.tick ELSE j.cron_last_tick_at END,
        status = CASE WHEN p.next_tick IS NULL THEN 'RETIRED' ELSE j.status END,
        retired_at = CASE WHEN p.next_tick IS NULL THEN COALESCE(j.cron_ends_at, p.tick)
                          ELSE j.retired_at END
    FROM plan AS p
    WHERE j.job_id = p.job_id
      AND j.job_id IN (SELECT job_id FROM locked)
      AND j.status = 'ACTIVE'
      AND j.paused_at IS NULL
      AND j.cron_next_run_at = p.tick
    RETURNING j.job_id, j.endpoint, j.endpoint_type, j.input, j.endpoint_snapshot, p.tick,
              p.materialize, p.idempotency_key, p.message, j.on_success, j.on_failure,
              j.ordering_key, j.concurrency_key
), gated AS (
    SELECT a.job_id, a.endpoint, a.endpoint_type, a.input, a.endpoint_snapshot, a.tick,
           a.idempotency_key, a.on_success, a.on_failure, a.ordering_key,
           CASE WHEN en.flow_control -> 'max_concurrency_per_key' IS NOT NULL
                THEN a.concurrency_key END AS concurrency_key
    FROM advanced AS a
    LEFT JOIN LATERAL (  -- LIMIT 1: a primary key probe per tick
        SELECT y.flow_control FROM endpoints AS y WHERE y.name = a.endpoint LIMIT 1
    ) AS en ON TRUE
    WHERE a.materialize
), created AS (
    INSERT INTO executions (job_id, endpoint, endpoint_type, idempotency_key, status,
                            input, run_at, max_attempts, on_success, on_failure,
                            ordering_key, concurrency_key, ordering_wait, ordering_at)
    SELECT job_id, endpoint, endpoint_type, idempotency_key, 'QUEUED', input, tick,
           COALESCE(CAST(endpoint_snapshot -> 'retry_policy' ->> 'max_attempts' AS BIGINT), 1),
           on_success, on_failure, ordering_key, concurrency_key,
           (ordering_key IS NOT NULL OR concurrency_key IS NOT NULL),
           CASE WHEN ordering_key IS NOT NULL OR concurrency_key IS NOT NULL THEN tick END
    FROM gated
    ON CONFLICT (job_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING execution_id, job_id, endpoint, ordering_key, concurrency_key
), logged AS (
    INSERT INTO execution_logs (execution_id, attempt_number, level, message)
    SELECT c.execution_id, 0, 'INFO', a.message
    FROM created AS c
    JOIN advanced AS a ON a.job_id = c.job_id
    RETURNING execution_id
)
SELECT a.job_id, l.execution_id, c.endpoint, c.ordering_key, c.concurrency_key
FROM advanced AS a
LEFT JOIN created AS c ON c.job_id = a.job_id
LEFT JOIN logged AS l ON l.execution_id = c.execution_id

-- name: scheduler_promote_due
-- PENDING -> QUEUED for executions whose run_at has come or comes before :horizon (now plus
-- one promote interval), in one bounded batch. Promoting early never delivers early: the
-- worker's claim requires run_at <= now(), so a QUEUED row waits for its run_at, and a
-- worker polling (or woken) at run_at finds it instead of waiting for the next promotion.
-- due walks idx_executions_pending (partial on PENDING, by run_at) with a LIMIT because
-- UPDATE ... LIMIT does not exist in CockroachDB. It is a CTE, evaluated once, and not a
-- subquery of the UPDATE: PostgreSQL may rescan a locking subquery, and a rescan skips
-- the rows this statement already updated and returns the next ones, overrunning LIMIT.
-- SKIP LOCKED lets two schedulers promote disjoint rows instead of queueing on each other;
-- correctness does not depend on it: the UPDATE re-checks the source statuses (the
-- transition table's sources of QUEUED), so a row promoted or cancelled concurrently is
-- left alone.
-- The log row is written by the same statement, for exactly the rows that moved.
WITH due AS (
    SELECT execution_id
    FROM executions
    WHERE status = 'PENDING'
      AND run_at <= CAST(:horizon AS TIMESTAMPTZ)
      AND /*region_filter*/ TRUE
    ORDER BY run_at ASC
    LIMIT :batch
    FOR UPDATE SKIP LOCKED
), promoted AS (
    UPDATE executions
    SET status = 'QUEUED'
    WHERE execution_id IN (SELECT execution_id FROM due)
      AND status = ANY(CAST(:from_statuses AS TEXT[]))
    RETURNING execution_id, attempt_count
), logged AS (
    INSERT INTO execution_logs (execution_id, attempt_number, level, message)
    SELECT execution_id, attempt_count, 'INFO', :message
    FROM promoted
    RETURNING execution_id
)
SELECT count(*) AS promoted FROM logged

-- name: scheduler_park
-- One page of parking (migration 018): due rows of the endpoints nobody may claim from the
-- fast claim (paused, flow-controlled, or held past :hold_ms from now; a shorter hold is
-- over before parking would pay) that are not parked yet, oldest first per endpoint, at
-- most :page in all. The endpoints are idx_endpoints_controlled's few; each one's rows a
-- range of idx_executions_due_by_endpoint, (name, false, ...). The UPDATE probes the page's
-- rows by primary key (joined to the page instead, a plan may hash it against every due
-- row of every endpoint: tests/integration/worker/test_parking.py reads both plans),
-- re-checks status and parked, so a row claimed or cancelled meanwhile is left alone, and
-- flags each endpoint it parked rows of (parked_rows), which is what unparking reads.
WITH page AS (
    SELECT x.execution_id
    FROM endpoints AS en
    CROSS JOIN LATERAL (
        SELECT d.execution_id
        FROM executions AS d
        WHERE d.endpoint = en.name
          AND d.parked = FALSE
          AND d.status IN ('QUEUED', 'RETRYING') AND NOT d.ordering_wait
        ORDER BY d.parked ASC, d.run_at ASC
        LIMIT :page
    ) AS x
    WHERE (en.paused_at IS NOT NULL OR en.held_until IS NOT NULL OR en.flow_control IS NOT NULL)
      AND (en.paused_at IS NOT NULL OR en.flow_control IS NOT NULL
           OR en.held_until > now() + CAST(:hold_ms AS BIGINT) * INTERVAL '1 millisecond')
    LIMIT :page
), moved AS (
    UPDATE executions AS e
    SET parked = TRUE
    WHERE e.execution_id = ANY(ARRAY(SELECT execution_id FROM page))  -- key probes
      AND e.status || '' IN ('QUEUED', 'RETRYING')  -- re-checked, not an index's key
      AND e.parked = FALSE
    RETURNING e.endpoint
), flagged AS (
    UPDATE endpoints
    SET parked_rows = TRUE
    WHERE name IN (SELECT endpoint FROM moved) AND parked_rows = FALSE
    RETURNING name
)
SELECT count(*) AS n FROM moved

-- name: scheduler_unpark
-- One page of unparking: the parked rows of endpoints released since (neither paused nor
-- flow-controlled, and no hold left), oldest first per endpoint, at most :page in all, back
-- into the claim's index. Reads only the flagged endpoints (idx_endpoints_parked_rows). An
-- endpoint released and without a parked due row left (as of this statement's snapshot, so
-- the pass after its last page) loses its flag.
WITH released AS (
    SELECT name
    FROM endpoints
    WHERE parked_rows
      AND paused_at IS NULL
      AND flow_control IS NULL
      AND (held_until IS NULL OR held_until <= now())
), page AS (
    SELECT x.execution_id
    FROM released AS r
    CROSS JOIN LATERAL (
        SELECT d.execution_id
        FROM executions AS d
        WHERE d.endpoint = r.name
          AND d.parked = TRUE
          AND d.status IN ('QUEUED', 'RETRYING') AND NOT d.ordering_wait
        ORDER BY d.parked ASC, d.run_at ASC
        LIMIT :page
    ) AS x
    LIMIT :page
), moved AS (
    UPDATE executions AS e
    SET parked = FALSE
    WHERE e.execution_id = ANY(ARRAY(SELECT execution_id FROM page))  -- key probes
      AND e.status || '' IN ('QUEUED', 'RETRYING')  -- re-checked, not an index's key
      AND e.parked = TRUE
    RETURNING e.endpoint
), cleared AS (
    UPDATE endpoints AS en
    SET parked_rows = FALSE
    WHERE en.name IN (SELECT name FROM released)
      AND NOT EXISTS (
          SELECT 1 FROM executions AS d
          WHERE d.endpoint = en.name AND d.parked = TRUE
            AND d.status IN ('QUEUED', 'RETRYING') AND NOT d.ordering_wait
      )
    RETURNING en.name
)
SELECT count(*) AS n FROM moved

-- name: scheduler_live_counts_clear
-- The live counts are replaced whole (chalicelib/scheduler/promoter.py): first the old set
-- goes, in the transaction that writes the new one (scheduler_live_counts_write), so a
-- reader sees one count or the other, never a mix. A few rows per endpoint.
DELETE FROM live_counts

-- name: scheduler_live_counts_write
-- The executions not yet ended, by endpoint and status, RUNNING left out (the workers'
-- slots bound those; readers count them live on idx_executions_running). One branch per
-- partial index of waiting work (idx_executions_pending, idx_executions_due_by_endpoint),
-- so the count reads the live backlog, never history, and runs once per LIVE_COUNTS_EVERY
-- in a deployment, not once per dashboard poll and scrape.
INSERT INTO live_counts (endpoint, status, n, counted_at)
SELECT endpoint, status, count(*), now()
FROM (
    SELECT endpoint, status FROM executions WHERE status = 'PENDING'
    UNION ALL
    SELECT endpoint, status FROM executions WHERE status IN ('QUEUED', 'RETRYING')
) AS live
GROUP BY endpoint, status

-- part: reclaimed
-- The executions of a reclaim's "stuck" CTE (execution_id, worker_id, locked) back to
-- RETRYING or FAILED (scheduler_reclaim_stuck says why each step is so); both reclaim
-- statements write it, then described, lost and logged.
reclaimed AS (
    UPDATE executions
    SET status = CASE WHEN attempt_count >= max_attempts THEN 'FAILED' ELSE 'RETRYING' END,
        run_at = CASE WHEN attempt_count >= max_attempts THEN run_at
                      ELSE CAST(:now AS TIMESTAMPTZ) END,
        completed_at = CASE WHEN attempt_count >= max_attempts THEN CAST(:now AS TIMESTAMPTZ)
                            ELSE completed_at END,
        worker_id = NULL,
        lease_expires_at = NULL,
        last_error_type = CASE WHEN attempt_count > 0 THEN 'WORKER_LOST'
                               ELSE last_error_type END,
        -- as the worker's finalize does for a retry (max_retry_duration_ms: migration 025)
        first_started_at = CASE WHEN attempt_count >= max_attempts THEN first_started_at
                                ELSE COALESCE(first_started_at, started_at) END
    WHERE execution_id IN (SELECT execution_id FROM stuck)
      AND status = ANY(CAST(:from_statuses AS TEXT[]))
      AND (lease_expires_at < CAST(:now AS TIMESTAMPTZ)
           OR (lease_expires_at IS NULL AND started_at < CAST(:cutoff AS TIMESTAMPTZ)))
    RETURNING execution_id, status, attempt_count, max_attempts, started_at, on_failure,
              batch_id, ordering_key, concurrency_key
)

-- part: described
-- Each reclaimed execution with its worker (from "stuck") and the reason logged.
described AS (
    SELECT r.execution_id, r.status, r.attempt_count, r.started_at, r.on_failure, r.batch_id,
           r.ordering_key, r.concurrency_key,
           'Worker ' || COALESCE(s.worker_id, 'unknown') || ' lost attempt '
               || CAST(r.attempt_count AS TEXT) || ': lease of '
               || CAST(:timeout_sec AS TEXT) || ' s not renewed' AS reason
    FROM reclaimed AS r
    JOIN stuck AS s ON s.execution_id = r.execution_id
)

-- part: lost
-- The attempt record of each reclaimed execution's lost attempt.
lost AS (
    INSERT INTO attempts (execution_id, attempt_number, status, started_at, completed_at,
                          duration_ms, error)
    SELECT execution_id, attempt_count, 'FAILED', started_at, CAST(:now AS TIMESTAMPTZ),
           CAST(EXTRACT(EPOCH FROM (CAST(:now AS TIMESTAMPTZ) - started_at)) * 1000 AS BIGINT),
           jsonb_build_object('type', 'WORKER_LOST', 'message', reason)
    FROM described
    WHERE attempt_count > 0
    ON CONFLICT (execution_id, attempt_number) DO NOTHING
    RETURNING execution_id
)

-- part: logged
-- One WARN line per reclaimed execution.
logged AS (
    INSERT INTO execution_logs (execution_id, attempt_number, level, message)
    SELECT execution_id, attempt_count, 'WARN',
           reason || CASE WHEN status = 'FAILED' THEN '; no attempts left, execution FAILED'
                          ELSE '; execution RETRYING now' END
    FROM described
    RETURNING execution_id
)

-- name: scheduler_reclaim_stuck
-- RUNNING executions whose lease expired lost their worker: it crashed, was killed, or its
-- Lambda timed out. A live worker renews the leases of what it holds
-- (worker_renew_leases), so an expired lease means no renewal for a whole
-- TE_STUCK_EXECUTION_TIMEOUT_SEC. They go back to RETRYING at once (attempts left) or to
-- FAILED.
-- stuck: RUNNING executions whose lease expired, oldest first, at most :batch (the scan
-- of scheduler_reclaim_candidates, which says how it reads), SKIP LOCKED so concurrent
-- reclaimers split the work; it also keeps the worker_id that the UPDATE clears, for the
-- messages.
-- reclaimed: re-checks the transition table's sources (RUNNING) and the lease, so a worker
-- that finished in the meantime wins and a second reclaimer finds nothing.
-- lost: the attempt record of the lost attempt. ON CONFLICT DO NOTHING: the worker may
-- have recorded that attempt just before it died, and its record is the better one.
-- reclaimed also sets last_error_type (migration 014) to the lost attempt's type, as the
-- worker's finalize does for the attempts it records: GET /executions filters on it.
-- logged: one WARN line per reclaimed execution.
-- callback / batch_id: what follows an execution this FAILED (its on_failure callback, its
-- batch's completion), created by the reclaimer in this transaction
-- (chalicelib/services/callbacks.py), as the worker's finalize does; ordering_key /
-- concurrency_key: a keyed execution this FAILED releases the next one of its key
-- (chalicelib/services/keys.py). One RETRYING keeps its key (a gated one its room).
WITH stuck AS (
    SELECT execution_id, worker_id
    FROM executions
    WHERE status = 'RUNNING'
      AND (lease_expires_at < CAST(:now AS TIMESTAMPTZ)
           OR (lease_expires_at IS NULL AND started_at < CAST(:cutoff AS TIMESTAMPTZ)))
      AND /*region_filter*/ TRUE
    ORDER BY started_at ASC
    LIMIT :batch
    FOR UPDATE SKIP LOCKED
)
, -- include: reclaimed
, -- include: described
, -- include: lost
, -- include: logged
SELECT d.execution_id, d.status,
       EXISTS (SELECT 1 FROM lost WHERE lost.execution_id = d.execution_id) AS attempt_recorded,
       CASE WHEN d.status = 'FAILED' THEN d.on_failure END AS callback,
       CASE WHEN d.status = 'FAILED' THEN d.batch_id END AS batch_id,
       CASE WHEN d.status = 'FAILED' THEN d.ordering_key END AS ordering_key,
       CASE WHEN d.status = 'FAILED' THEN d.concurrency_key END AS concurrency_key
FROM described AS d

-- name: scheduler_reclaim_candidates
-- The executions scheduler_reclaim_stuck would take, without locking them: when that
-- statement fails on something other than an outage (a row it cannot write, e.g. a
-- RUNNING row without started_at), the reclaimer walks these one by one
-- (scheduler_reclaim_listed) to find the row and set it aside (chalicelib/scheduler/
-- reclaimer.py), so one row cannot stop every reclaim after it. RUNNING executions whose
-- lease expired, oldest first, at most :batch, as scheduler_reclaim_stuck's "stuck" reads
-- them (the two change together): idx_executions_running (partial on RUNNING; RUNNING rows are few, at most the workers'
-- capacity, so the lease test is a filter). A row without a lease (claimed before
-- migration 003) expires at started_at plus the timeout (:cutoff = now minus it).
SELECT execution_id, worker_id
FROM executions
WHERE status = 'RUNNING'
  AND (lease_expires_at < CAST(:now AS TIMESTAMPTZ)
       OR (lease_expires_at IS NULL AND started_at < CAST(:cutoff AS TIMESTAMPTZ)))
  AND /*region_filter*/ TRUE
ORDER BY started_at ASC
LIMIT :batch

-- name: scheduler_reclaim_listed
-- scheduler_reclaim_stuck for the listed executions only (the row-by-row fallback): the
-- same take, on the rows still RUNNING and not locked by another reclaimer; the take
-- re-checks the expired lease itself.
WITH stuck AS (
    SELECT execution_id, worker_id
    FROM executions
    WHERE execution_id = ANY(CAST(:ids AS TEXT[]))
      AND status = 'RUNNING'
    FOR UPDATE SKIP LOCKED
)
, -- include: reclaimed
, -- include: described
, -- include: lost
, -- include: logged
SELECT d.execution_id, d.status,
       EXISTS (SELECT 1 FROM lost WHERE lost.execution_id = d.execution_id) AS attempt_recorded,
       CASE WHEN d.status = 'FAILED' THEN d.on_failure END AS callback,
       CASE WHEN d.status = 'FAILED' THEN d.batch_id END AS batch_id,
       CASE WHEN d.status = 'FAILED' THEN d.ordering_key END AS ordering_key,
       CASE WHEN d.status = 'FAILED' THEN d.concurrency_key END AS concurrency_key
FROM described AS d

-- name: scheduler_reclaim_set_aside
-- An expired execution the reclaimer cannot reclaim even alone (scheduler_reclaim_listed
-- failed on it) goes to FAILED at once, with what little can always be written: the
-- status, an ERROR log line saying why, and, when an attempt was running, a FAILED
-- attempt of type UNPROCESSABLE (the dead-letter view filters on it, as the row's
-- last_error_type; ON CONFLICT: the worker may have recorded that attempt). Only while still RUNNING on an expired lease: a
-- worker that finished or renewed it meanwhile wins. No callback or batch completion follows (they may be
-- what failed); the log line says so.
WITH failed AS (
    UPDATE executions
    SET status = 'FAILED',
        completed_at = CAST(:now AS TIMESTAMPTZ),
        worker_id = NULL,
        lease_expires_at = NULL,
        last_error_type = CASE WHEN attempt_count > 0 THEN 'UNPROCESSABLE'
                               ELSE last_error_type END
    WHERE execution_id = :execution_id
      AND status = 'RUNNING'
      AND (lease_expires_at < CAST(:now AS TIMESTAMPTZ)
           OR (lease_expires_at IS NULL AND started_at < CAST(:cutoff AS TIMESTAMPTZ)))
    RETURNING execution_id, attempt_count, started_at, ordering_key, concurrency_key
), logged AS (
    INSERT INTO execution_logs (execution_id, attempt_number, level, message)
    SELECT execution_id, attempt_count, 'ERROR',
           'The stuck reclaimer could not reclaim this execution (' || CAST(:reason AS TEXT)
               || '); execution FAILED without callbacks'
    FROM failed
    RETURNING execution_id
), noted AS (
    INSERT INTO attempts (execution_id, attempt_number, status, started_at, completed_at,
                          error)
    SELECT execution_id, attempt_count, 'FAILED',
           COALESCE(started_at, CAST(:now AS TIMESTAMPTZ)), CAST(:now AS TIMESTAMPTZ),
           jsonb_build_object('type', 'UNPROCESSABLE', 'message', CAST(:reason AS TEXT))
    FROM failed
    WHERE attempt_count > 0
    ON CONFLICT (execution_id, attempt_number) DO NOTHING
    RETURNING execution_id
)
SELECT l.execution_id, EXISTS (SELECT 1 FROM noted) AS attempt_recorded,
       (SELECT f.ordering_key FROM failed AS f) AS ordering_key,
       (SELECT f.concurrency_key FROM failed AS f) AS concurrency_key
FROM logged AS l

-- name: scheduler_cron_set_aside
-- Cron jobs the materializer cannot schedule (chalicelib/scheduler/materializer.py: a row
-- it cannot read or plan, or a plan the tick statement refuses) leave the due scan:
-- cron_next_run_at NULL takes them out of idx_jobs_cron_due's range for good, so they
-- can never again hold a batch position that schedulable jobs need, and schedule_error
-- says why where the API shows the job. Only ACTIVE cron jobs: one retired or replaced
-- meanwhile is left as it is. Two schedulers setting the same job aside write the same
-- values; RETURNING lets each log only the jobs its own statement changed.
UPDATE jobs AS j
SET cron_next_run_at = NULL,
    schedule_error = f.error
FROM unnest(CAST(:job_ids AS TEXT[]), CAST(:errors AS TEXT[])) AS f(job_id, error)
WHERE j.job_id = f.job_id
  AND j.trigger_type = 'CRON'
  AND j.status = 'ACTIVE'
  AND j.schedule_error IS NULL
RETURNING j.job_id
