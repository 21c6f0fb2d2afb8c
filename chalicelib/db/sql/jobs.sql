-- name: jobs_get
-- Through job_states: a one-shot job's status follows its execution. Every statement that
-- reads a job for the API selects the view's columns whole (its "*"): the view is the one
-- list of them, and chalicelib/services/views.py Job reads each by name.
SELECT *
FROM job_states
WHERE job_id = :job_id

-- name: jobs_delivery_context
-- What a job adds to its deliveries (migration 023: its own headers, its W3C trace
-- context), read by PUT /jobs/{id} so that a cron job's new version keeps them; one probe
-- of pk_jobs. Not in job_states: the API never shows a job's headers.
SELECT headers, traceparent, tracestate FROM jobs WHERE job_id = :job_id

-- name: jobs_latest_execution
-- Uses idx_executions_by_job (job_id, created_at DESC); execution_id breaks ties so the
-- answer is deterministic when two ticks share a timestamp.
SELECT execution_id, job_id, status, attempt_count, run_at, started_at, completed_at,
       created_at
FROM executions
WHERE job_id = :job_id
ORDER BY created_at DESC, execution_id DESC
LIMIT 1

-- name: jobs_executions_of
-- The executions of a page of one-shot jobs (one each), fetched in one round trip instead
-- of one query per listed job.
SELECT execution_id, job_id, status, attempt_count, run_at, started_at, completed_at,
       created_at
FROM executions
WHERE job_id = ANY(CAST(:job_ids AS TEXT[]))

-- name: jobs_list
-- GET /jobs without a status, or with RETIRED (most of history): a keyset page on
-- (created_at, job_id) descending, stable while jobs are being inserted. It walks
-- idx_jobs_created (idx_jobs_endpoint for one endpoint) newest first and stops at a page;
-- the cursor bounds the walk. Through job_states, so status is the derived one. Each line
-- tagged "-- if <param>" is kept only when the parameter is given (chalicelib/db/shapes.py):
-- every filter shape is its own statement, whose generic plan is its custom plan. The
-- RETIRED filter is written "status <> 'ACTIVE'" (the only other value): the planner
-- estimates a derived "<>" to keep most rows, as it does, and walks the index to the first
-- page; for "=" it expects a handful and sorts the whole table instead. CRON is written
-- as a literal: the planner then knows cron jobs are few (they are definitions) and reads
-- them on idx_jobs_cron, where a generic "trigger_type = $1" would walk the history of
-- one-shot jobs looking for them. One endpoint is a range of idx_jobs_endpoint's key
-- (endpoint, created_at) from (name, 1970) to (name, 9999), in that order (one endpoint:
-- the same order): written "endpoint = :endpoint", the planner drops the endpoint from
-- the order, and a generic plan that guesses the endpoint holds a third of the jobs may
-- walk idx_jobs_created filtering every other endpoint's out (a plan test with an
-- endpoint of one job caught it); created_at <= :after_ts bounds that range at the cursor
-- (the index does not hold job_id). ACTIVE has its own statements (jobs_list_active*).
-- shape: cron or trigger_type
SELECT s.*
FROM job_states AS s
WHERE TRUE
  AND (s.endpoint, s.created_at) >= (:endpoint, TIMESTAMPTZ '1970-01-01 00:00:00+00') -- if endpoint
  AND (s.endpoint, s.created_at) <= (:endpoint, TIMESTAMPTZ '9999-12-31 00:00:00+00') -- if endpoint
  AND s.trigger_type = :trigger_type                            -- if trigger_type
  AND s.trigger_type = 'CRON'                                   -- if cron
  AND s.status <> 'ACTIVE'                                      -- if retired
  AND s.created_at <= :after_ts                                 -- if after_ts
  AND (s.created_at, s.job_id) < (:after_ts, :after_id)         -- if after_ts
ORDER BY
    s.endpoint ASC,                                             -- if endpoint
    s.created_at DESC, s.job_id DESC
LIMIT :limit_plus_one

-- name: jobs_list_active
-- GET /jobs?status=ACTIVE: the same page as jobs_list, drawn from what is live instead of
-- walking the history to find it, in three arms, each cut at the page size, merged and
-- cut again, then shown through job_states (one probe per job shown). Tagged lines: as
-- jobs_list. An arm the trigger filter rules out is off at once: :cron and :one_shot are
-- one-time filters (parameters only), and :waiting lists the statuses read.
-- cron: the ACTIVE cron jobs (stored status) on idx_jobs_cron_due, read whole and sorted:
--   they cost the cron definitions, never the history of their ticks.
-- waiting: one-shot jobs whose (only) execution waits, found from the execution (its
--   created_at is its job's: one statement writes both), per status of :waiting on
--   idx_executions_waiting (migration 014), newest first, a page each. The lateral's
--   literal IN list lets the partial index serve "status = statuses.status"; an IMMEDIATE
--   job's execution is never PENDING, so the service leaves PENDING out for it;
--   created_at <= :after_ts bounds the range at the cursor (the row comparison is on
--   job_id, which the index does not hold). One endpoint's are a range of
--   idx_executions_by_endpoint's key (endpoint, status, created_at) instead (migration
--   020; written as a range, which only that index serves, since the planner estimates
--   "endpoint = :endpoint" from the endpoint's history). The trigger is checked on the rows
--   read: its share of the live rows sets how far a page reads.
-- running: one-shot jobs whose execution runs: few (what the workers hold), read whole on
--   idx_executions_running and sorted. MATERIALIZED: planned alone, the running rows are
--   read on their index; planned under the page's LIMIT, the planner could prefer a
--   sequential scan of executions sorted in parallel, a read of the whole history.
-- A cron job's ticks are in no arm: a cron job's status is its own. Each execution's job is
-- one probe of pk_jobs (a LATERAL kept apart by its LIMIT): joined plainly, a few hundred
-- running rows are enough for the planner to hash the whole jobs table instead.
WITH running AS MATERIALIZED (
    SELECT x.job_id, x.created_at
    FROM executions AS x
    WHERE CAST(:one_shot AS BOOLEAN)
      AND x.status = 'RUNNING'
      AND x.endpoint = :endpoint                                        -- if endpoint
      AND (x.created_at, x.job_id) < (:after_ts, :after_id)             -- if after_ts
)
SELECT s.*
FROM (
    SELECT arms.job_id, arms.created_at
    FROM (
        (
        SELECT j.job_id, j.created_at
        FROM jobs AS j
        WHERE CAST(:cron AS BOOLEAN)
          AND j.trigger_type = 'CRON' AND j.status = 'ACTIVE'
          AND j.endpoint = :endpoint                                    -- if endpoint
          AND (j.created_at, j.job_id) < (:after_ts, :after_id)         -- if after_ts
        ORDER BY j.created_at DESC, j.job_id DESC
        LIMIT :limit_plus_one
        )
        UNION ALL
        SELECT waiting.job_id, waiting.created_at
        FROM unnest(CAST(:waiting AS TEXT[])) AS statuses (status)
        CROSS JOIN LATERAL (
            SELECT x.job_id, x.created_at
            FROM executions AS x
            CROSS JOIN LATERAL (
                SELECT j.trigger_type FROM jobs AS j WHERE j.job_id = x.job_id LIMIT 1
            ) AS j
            WHERE x.status = statuses.status
              AND x.status IN ('PENDING', 'QUEUED', 'RETRYING')
              AND j.trigger_type <> 'CRON'
              AND j.trigger_type = :trigger_type                        -- if trigger_type
              AND (x.endpoint, x.status, x.created_at) >= (:endpoint, statuses.status, TIMESTAMPTZ '1970-01-01 00:00:00+00') -- if endpoint
              AND (x.endpoint, x.status, x.created_at) <= (:endpoint, statuses.status, TIMESTAMPTZ '9999-12-31 00:00:00+00') -- if endpoint
              AND x.created_at <= :after_ts                             -- if after_ts
              AND (x.created_at, x.job_id) < (:after_ts, :after_id)     -- if after_ts
            ORDER BY
                x.endpoint ASC, x.status ASC,                           -- if endpoint
                x.created_at DESC, x.job_id DESC
            LIMIT :limit_plus_one
        ) AS waiting
        UNION ALL
        (
        SELECT x.job_id, x.created_at
        FROM running AS x
        CROSS JOIN LATERAL (
            SELECT j.trigger_type FROM jobs AS j WHERE j.job_id = x.job_id LIMIT 1
        ) AS j
        WHERE j.trigger_type <> 'CRON'
          AND j.trigger_type = :trigger_type                            -- if trigger_type
        ORDER BY x.created_at DESC, x.job_id DESC
        LIMIT :limit_plus_one
        )
    ) AS arms
    ORDER BY arms.created_at DESC, arms.job_id DESC
    LIMIT :limit_plus_one
) AS page
JOIN job_states AS s ON s.job_id = page.job_id
ORDER BY page.created_at DESC, page.job_id DESC

-- name: jobs_retire
-- Retires a cron job: cancel (replaced_by_id NULL) or replacement by a new version (PUT).
-- (A one-shot job is never written: its status is its execution's, see job_states.)
-- CAS on status = 'ACTIVE': RETIRED jobs are skipped by the cron materializer
-- (idx_jobs_cron_due covers only ACTIVE rows), and of two concurrent updates of the same
-- version only one retires it; the other changes 0 rows and its transaction (holding its
-- new version row) is rolled back with 409 JOB_NOT_UPDATABLE.
-- cancelled/logged: the scheduler materializes a cron tick up to one tick interval before
-- it is due (QUEUED, run_at = the tick; the claim waits for run_at). A tick that has not
-- happened yet must not fire for a retired job: its QUEUED executions with run_at in the
-- future are CANCELLED, with a log line. Due or running executions are in flight and
-- continue.
WITH retired AS (
    UPDATE jobs
    SET status = 'RETIRED', retired_at = now(),
        replaced_by_id = CAST(:replaced_by_id AS TEXT)
    WHERE job_id = :job_id AND status = 'ACTIVE'
    RETURNING job_id, replaced_by_id
), cancelled AS (
    UPDATE executions AS e
    SET status = 'CANCELLED', completed_at = now(), worker_id = NULL
    FROM retired AS r
    WHERE e.job_id = r.job_id AND e.status = 'QUEUED' AND e.run_at > now()
    RETURNING e.execution_id, e.attempt_count, r.replaced_by_id, e.ordering_key,
              e.concurrency_key
), logged AS (
    INSERT INTO execution_logs (execution_id, attempt_number, level, message)
    SELECT execution_id, attempt_count, 'INFO',
           CASE WHEN replaced_by_id IS NULL
                THEN 'Job retired before this tick; execution CANCELLED.'
                ELSE 'Job replaced by a new version before this tick; execution CANCELLED.'
           END
    FROM cancelled
    RETURNING log_id
)
SELECT job_id, (SELECT count(*) FROM logged) AS cancelled,
       ARRAY(SELECT execution_id FROM cancelled
             WHERE ordering_key IS NOT NULL OR concurrency_key IS NOT NULL) AS keyed
FROM retired

-- name: jobs_version_root
-- Walk previous_version_id back to the oldest version still stored (chains are short: one
-- row per update). Usually version 1; the housekeeper purges a DELAYED job's earlier
-- versions (one-shot jobs without an execution) once they are older than the retention,
-- while the job itself may still wait, and its chain then starts at the oldest one left.
WITH RECURSIVE up (job_id, previous_version_id, depth) AS (
    SELECT job_id, previous_version_id, 0 FROM jobs WHERE job_id = :job_id
    UNION ALL
    SELECT j.job_id, j.previous_version_id, up.depth + 1
    FROM jobs j JOIN up ON j.job_id = up.previous_version_id
)
SELECT job_id FROM up ORDER BY depth DESC LIMIT 1

-- name: jobs_reschedule_keep_version
-- PUT /jobs/{id} of a DELAYED job, first statement: the version being replaced, kept as a
-- RETIRED row of its own (:version_id) that the job now names as its previous version, so
-- GET /jobs/{id}/versions shows every run_at the job had. The job itself keeps its id, its
-- execution, its idempotency key and its created_at (a one-shot job's and its execution's
-- are one, which GET /jobs?status=ACTIVE pages on): the kept row has no key (the job holds
-- it, idx_jobs_idempotency), no execution (so job_states shows it RETIRED) and no batch
-- (its batch lists the job once). Rolled back with the transaction when the execution
-- cannot move (jobs_reschedule).
INSERT INTO jobs (job_id, endpoint, endpoint_type, trigger_type, status, version,
                  previous_version_id, replaced_by_id, input, run_at, endpoint_snapshot,
                  created_at, retired_at, on_success, on_failure, parent_execution_id,
                  callback_depth)
SELECT :version_id, endpoint, endpoint_type, trigger_type, 'RETIRED', version,
       previous_version_id, job_id, input, run_at, endpoint_snapshot, created_at, now(),
       on_success, on_failure, parent_execution_id, callback_depth
FROM jobs
WHERE job_id = :job_id AND trigger_type = 'DELAYED'
RETURNING job_id

-- name: jobs_reschedule
-- PUT /jobs/{id} of a DELAYED job: its execution moves to :run_at, the job takes the next
-- version (its previous one kept by jobs_reschedule_keep_version) and the execution's log
-- says so, in one statement. The compare-and-set on status is what makes the old time
-- never fire: only a PENDING or QUEUED execution moves, and it goes back to PENDING
-- (unparked: a PENDING row is never parked), so the promoter queues it again for the new
-- time and no claim takes it before (the claim moves only QUEUED or RETRYING rows with
-- run_at <= now(), re-checked on the row it updates). A claim that got there first left it
-- RUNNING: nothing moves, the job is not touched, and the service answers 409; at
-- SERIALIZABLE a claim committing concurrently makes this transaction retry (40001) and
-- find it RUNNING. The execution is found on idx_executions_by_job (one row: a one-shot
-- job has one execution). A keyed execution (an ordering key, or a gated concurrency key)
-- takes its new due time as its place in its key and waits for its turn again, and the service settles its key (chalicelib/services/keys.py).
WITH moved AS (
    UPDATE executions
    SET run_at = CAST(:run_at AS TIMESTAMPTZ), status = 'PENDING', parked = FALSE,
        ordering_at = CASE WHEN ordering_key IS NOT NULL OR concurrency_key IS NOT NULL
                           THEN CAST(:run_at AS TIMESTAMPTZ) END,
        ordering_wait = (ordering_key IS NOT NULL OR concurrency_key IS NOT NULL)
    WHERE job_id = :job_id AND status IN ('PENDING', 'QUEUED')
    RETURNING execution_id, attempt_count, endpoint, ordering_key, concurrency_key
), job AS (
    UPDATE jobs
    SET run_at = CAST(:run_at AS TIMESTAMPTZ), version = version + 1,
        previous_version_id = :version_id
    WHERE job_id = :job_id AND trigger_type = 'DELAYED' AND EXISTS (SELECT 1 FROM moved)
    RETURNING version
), logged AS (
    INSERT INTO execution_logs (execution_id, attempt_number, level, message)
    SELECT m.execution_id, m.attempt_count, 'INFO', :message
    FROM moved AS m CROSS JOIN job
    RETURNING log_id
)
SELECT m.execution_id, j.version, m.endpoint, m.ordering_key, m.concurrency_key
FROM moved AS m CROSS JOIN job AS j

-- name: jobs_version_chain
-- Every version descending from the root, oldest first. The cursor's id names the last
-- version seen; versions after it have a higher version number.
WITH RECURSIVE chain (job_id, version) AS (
    SELECT job_id, version FROM jobs WHERE job_id = :root_id
    UNION ALL
    SELECT j.job_id, j.version FROM jobs j JOIN chain ON j.previous_version_id = chain.job_id
)
SELECT j.*
FROM chain JOIN job_states j ON j.job_id = chain.job_id
WHERE CAST(:after_id AS TEXT) IS NULL
   OR chain.version > (SELECT version FROM jobs WHERE job_id = :after_id)
ORDER BY chain.version ASC
LIMIT :limit_plus_one

-- name: jobs_window_stats
-- GET /jobs/{id}/status: executions created since :since (the last 24 hours), newest
-- first on idx_executions_by_job, at most :max_rows of them: a job that runs very often
-- is judged on its latest :max_rows executions of the window, so the read is bounded
-- whatever its rate. Durations are averaged over executions that have one (finished
-- ones). percentile_cont takes FLOAT8 on both PostgreSQL and CockroachDB (CockroachDB has
-- no INT overload), hence the casts; the results are rounded to whole milliseconds here.
WITH recent AS (
    SELECT status, duration_ms
    FROM executions
    WHERE job_id = :job_id AND created_at >= :since
    ORDER BY created_at DESC
    LIMIT :max_rows
)
SELECT
    count(*) AS total,
    COALESCE(sum(CASE WHEN status = 'SUCCESS' THEN 1 ELSE 0 END), 0) AS succeeded,
    COALESCE(sum(CASE WHEN status = 'FAILED' THEN 1 ELSE 0 END), 0) AS failed,
    CAST(round(avg(duration_ms)) AS BIGINT) AS avg_duration_ms,
    (SELECT CAST(round(CAST(percentile_cont(CAST(0.99 AS FLOAT8))
                 WITHIN GROUP (ORDER BY CAST(duration_ms AS FLOAT8)) AS NUMERIC)) AS BIGINT)
     FROM recent WHERE duration_ms IS NOT NULL) AS p99_duration_ms
FROM recent

-- name: jobs_active_counts
-- A one-shot job's in-flight executions (it has one), on idx_executions_by_job: "pending"
-- is everything not yet running (PENDING, QUEUED and RETRYING), "running" is RUNNING. A
-- cron job's are counted by jobs_active_counts_cron instead: its executions are its
-- whole history.
SELECT
    COALESCE(sum(CASE WHEN status IN ('PENDING', 'QUEUED', 'RETRYING') THEN 1 ELSE 0 END), 0)
        AS pending,
    COALESCE(sum(CASE WHEN status = 'RUNNING' THEN 1 ELSE 0 END), 0) AS running
FROM executions
WHERE job_id = :job_id AND status IN ('PENDING', 'QUEUED', 'RETRYING', 'RUNNING')

-- name: jobs_active_counts_cron
-- jobs_active_counts for a cron job: its live executions among its newest :max_rows
-- executions (idx_executions_by_job newest first, the same rows jobs_window_stats reads
-- for a job that ticks often), so the count costs at most a page of the job's ticks,
-- never its history nor its endpoint's backlog. A cron job's live ticks are its newest
-- (each tick is created after the one before, and they end roughly in order); a job with
-- more than :max_rows ticks waiting shows the ones among its newest :max_rows. A cron
-- job's executions are never PENDING (ticks and runs-now are born QUEUED:
-- scheduler_cron_apply_ticks, jobs_trigger_execution), so "pending" is QUEUED and
-- RETRYING.
WITH newest AS (
    SELECT status
    FROM executions
    WHERE job_id = :job_id
    ORDER BY created_at DESC
    LIMIT :max_rows
)
SELECT COALESCE(sum(CASE WHEN status IN ('PENDING', 'QUEUED', 'RETRYING') THEN 1 ELSE 0 END),
                0) AS pending,
       COALESCE(sum(CASE WHEN status = 'RUNNING' THEN 1 ELSE 0 END), 0) AS running
FROM newest

-- name: jobs_get_endpoints
-- The endpoints a creation names (the jobs' endpoints and their callback endpoints), with
-- their payload specs' schemas, in one round trip: a batch of 1,000 jobs reads its handful
-- of endpoints once, not once per item. Read in the creating transaction, the snapshot and
-- the input validation see the endpoint version the job row records, even if the endpoint
-- is updated concurrently (SERIALIZABLE). A soft-deleted endpoint is not there (404); a
-- delete racing this read writes the row it read, so one of the two transactions retries
-- (40001). on_success / on_failure are the endpoint's default callbacks for its jobs;
-- max_concurrency_per_key (NULL: none) says whether a job's concurrency key gates its
-- execution. fingerprint is what jobs_create checks a remembered endpoint against: what a
-- job created from this endpoint row depends on (everything read here), hashed by the
-- server, so POST /jobs's fast path checks that the endpoint a process remembers still
-- hashes the same, in the creating statement itself (the part "job" computes the same
-- expression: the two change together). A JSONB array keeps each field in its place
-- (NULLs included), so two different rows never hash alike by shifting a value from one
-- field to the next.
SELECT e.name, e.endpoint_type, e.payload_spec_ref, e.config_ref, e.spec, e.retry_policy,
       e.on_success, e.on_failure, p.schema_json AS payload_schema,
       CAST(e.flow_control ->> 'max_concurrency_per_key' AS BIGINT) AS max_concurrency_per_key,
       md5(CAST(jsonb_build_array(e.endpoint_type, e.payload_spec_ref, e.config_ref, e.spec,
                                  e.retry_policy, e.on_success, e.on_failure, p.schema_json)
                AS TEXT)) AS fingerprint
FROM endpoints e
LEFT JOIN payload_specs p ON p.name = e.payload_spec_ref
WHERE e.name = ANY(CAST(:names AS TEXT[])) AND e.deleted_at IS NULL

-- name: jobs_find_by_idempotency_keys
-- Deduplication lookup on the unique index idx_jobs_idempotency (endpoint, key) for many
-- pairs at once, through job_states (a one-shot job's status is its execution's). Pairs
-- come as one JSONB array of {"endpoint", "key"} objects (jsonb_array_elements reads the
-- same on PostgreSQL and CockroachDB). The LATERAL subquery (kept apart by its LIMIT 1, the
-- index being unique anyway) makes each pair one probe of idx_jobs_idempotency whatever the
-- table's size: written as "(endpoint, key) IN (SELECT ...)", the planner hashes a small
-- jobs table after a sequential scan, and at SERIALIZABLE that read locks the whole
-- relation, so every concurrent job insert became a serialization failure (POST /jobs from
-- 8 clients ran out of 40001 retries).
SELECT j.*
FROM jsonb_array_elements(CAST(:pairs AS JSONB)) AS r
CROSS JOIN LATERAL (
    SELECT * FROM job_states AS s
    WHERE s.endpoint = r ->> 'endpoint' AND s.idempotency_key = r ->> 'key'
    LIMIT 1
) AS j

-- part: job
-- The jobs of one creation (jobs_create says how they are written). A job row carrying a
-- "fingerprint" is written only if its endpoint is live and still hashes to it (the
-- fingerprint of jobs_get_endpoints, the same expression): POST /jobs's fast path built
-- the row from an endpoint it remembered, and a changed or deleted endpoint makes it write
-- nothing and fall back to the full transaction. Rows without one come from a transaction
-- that read the endpoints itself.
job AS (
    INSERT INTO jobs (job_id, endpoint, endpoint_type, trigger_type, idempotency_key, input,
                      run_at, cron_expression, cron_timezone, cron_starts_at, cron_ends_at,
                      cron_next_run_at, endpoint_snapshot, version, previous_version_id,
                      batch_id, on_success, on_failure, parent_execution_id, callback_depth,
                      headers, traceparent, tracestate, delivery_overrides, ordering_key,
                      concurrency_key)
    SELECT r ->> 'job_id', r ->> 'endpoint', r ->> 'endpoint_type', r ->> 'trigger_type',
           r ->> 'idempotency_key', r -> 'input', CAST(r ->> 'run_at' AS TIMESTAMPTZ),
           r ->> 'cron_expression', r ->> 'cron_timezone',
           CAST(r ->> 'cron_starts_at' AS TIMESTAMPTZ),
           CAST(r ->> 'cron_ends_at' AS TIMESTAMPTZ),
           CAST(r ->> 'cron_next_run_at' AS TIMESTAMPTZ), snapshot.value,
           CAST(r ->> 'version' AS BIGINT), r ->> 'previous_version_id', r ->> 'batch_id',
           r ->> 'on_success', r ->> 'on_failure', r ->> 'parent_execution_id',
           CAST(r ->> 'callback_depth' AS BIGINT), r -> 'headers', r ->> 'traceparent',
           r ->> 'tracestate', r -> 'delivery_overrides', r ->> 'ordering_key',
           r ->> 'concurrency_key'
    FROM jsonb_array_elements(CAST(:jobs AS JSONB)) AS r
    JOIN jsonb_each(CAST(:snapshots AS JSONB)) AS snapshot ON snapshot.key = r ->> 'endpoint'
    WHERE r ->> 'fingerprint' IS NULL OR EXISTS (
        SELECT 1
        FROM endpoints e
        LEFT JOIN payload_specs p ON p.name = e.payload_spec_ref
        WHERE e.name = r ->> 'endpoint' AND e.deleted_at IS NULL
          AND r ->> 'fingerprint' =
              md5(CAST(jsonb_build_array(e.endpoint_type, e.payload_spec_ref, e.config_ref,
                                         e.spec, e.retry_policy, e.on_success, e.on_failure,
                                         p.schema_json)
                       AS TEXT))
    )
    ON CONFLICT (endpoint, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING job_id
)

-- part: execution
-- The one-shot executions of the jobs the part "job" wrote.
execution AS (
    INSERT INTO executions (execution_id, job_id, endpoint, endpoint_type, idempotency_key,
                            status, run_at, input, max_attempts, batch_id, on_success,
                            on_failure, ordering_key, concurrency_key, ordering_wait,
                            ordering_at, ordering_seq)
    SELECT r ->> 'execution_id', job.job_id, r ->> 'endpoint', r ->> 'endpoint_type',
           r ->> 'idempotency_key', r ->> 'status',
           COALESCE(CAST(r ->> 'run_at' AS TIMESTAMPTZ), now()), r -> 'input',
           CAST(r ->> 'max_attempts' AS BIGINT), r ->> 'batch_id', r ->> 'on_success',
           r ->> 'on_failure', r ->> 'ordering_key', r ->> 'concurrency_key',
           (r ->> 'ordering_key' IS NOT NULL OR r ->> 'concurrency_key' IS NOT NULL),
           CASE WHEN r ->> 'ordering_key' IS NOT NULL OR r ->> 'concurrency_key' IS NOT NULL
                THEN COALESCE(CAST(r ->> 'run_at' AS TIMESTAMPTZ), now()) END,
           CAST(r ->> 'ordering_seq' AS BIGINT)
    FROM jsonb_array_elements(CAST(:executions AS JSONB)) AS r
    JOIN job ON job.job_id = r ->> 'job_id'
    RETURNING execution_id, status, attempt_count
)

-- part: logged
-- The "created" log line of each execution the part "execution" wrote.
logged AS (
    -- No execution exists without the log of how it began. A one-shot job's execution is
    -- QUEUED if IMMEDIATE, PENDING if DELAYED, which the line names.
    INSERT INTO execution_logs (execution_id, attempt_number, level, message)
    SELECT execution_id, attempt_count, 'INFO',
           'Execution created ' || status || ' ('
           || CASE WHEN status = 'QUEUED' THEN 'IMMEDIATE' ELSE 'DELAYED' END || ' job).'
    FROM execution
    RETURNING log_id
)

-- name: jobs_create
-- Every job of one creation request, its one-shot executions and their "created" log lines
-- in ONE statement (one row for POST /jobs, up to 1,000 for POST /jobs/batch, the callbacks
-- of a finalize batch): multi-row INSERTs from JSONB arrays cost one round trip and one
-- plan however many jobs they write.
--
-- job_id and execution_id are chosen by the caller (the columns' 'job_' / 'exec_' form),
-- so the ids written map back to their items without relying on RETURNING order, and only
-- the ids come back, as one JSON array with the statement's now(): the caller knows every
-- other column (created_at is that now()), and decoding 1,000 rows of timestamps back
-- cost a third of a batch's time. The endpoints' snapshots come once each (:snapshots, by
-- endpoint name), not once per job: encoding a snapshot into each of 1,000 rows was a
-- quarter of a batch's time.
--
-- ON CONFLICT DO NOTHING on idx_jobs_idempotency: a twin that committed first is missing
-- from the result and read back; at SERIALIZABLE a concurrent twin makes this transaction
-- retry (40001). The same key also makes the fast path's statement, sent again after a
-- lost connection, write nothing twice (it only sends jobs that carry a key). An execution
-- row is written only for a job written here. IMMEDIATE rows carry no run_at: the database
-- clock decides "now", the clock the claim compares against. batch_id and the resolved
-- callbacks are copied from the job so the finalize learns them from the row it updates.
-- So is the ordering key, and the concurrency key of a gated execution (one whose endpoint
-- limits executions per key: the caller decides, from the endpoint it read in the
-- transaction; a job keeps the key it was given either way): a keyed execution is written
-- waiting for its key's turn, at its place (its due time, then the statement's now(), then
-- ordering_seq), and the caller settles the key in the same transaction (chalicelib/services/keys.py).
--
-- One row: the ids of the jobs written, and the statement's now() (the created_at, and an
-- IMMEDIATE execution's run_at, every row it wrote got by default).
WITH
-- include: job
, -- include: execution
, -- include: logged
SELECT COALESCE(jsonb_agg(job_id), '[]') AS job_ids, now() AS now FROM job

-- name: jobs_create_and_wake
-- jobs_create, plus the wake-up (wakeup_publish) when it queued an execution: PostgreSQL
-- delivers it at COMMIT, so POST /jobs's fast path (one statement, no transaction block)
-- wakes LISTENing workers without a round trip of its own. Never used where
-- notify.enabled() is false (CockroachDB).
WITH
-- include: job
, -- include: execution
, -- include: logged
, woke AS (
    SELECT pg_notify('te_executions_queued', '') AS sent
    FROM execution WHERE status = 'QUEUED' LIMIT 1
)
SELECT COALESCE(jsonb_agg(job_id), '[]') AS job_ids, now() AS now,
       (SELECT count(*) FROM woke) AS woke
FROM job

-- name: jobs_trigger_execution
-- Run now (POST /jobs/{id}/trigger): one extra QUEUED execution of an ACTIVE cron job, due
-- now, with the job's input, attempts budget and callbacks, as a tick would get; the job's
-- schedule (cron_next_run_at, cron_last_tick_at) is not touched. :idempotency_key is the
-- trigger's own ("trigger:<id>"), so it never meets a tick's in idx_executions_cron_dedup.
-- The guard on status makes a trigger racing a cancel or an update create nothing. The job's
-- concurrency key gates the execution only if its endpoint limits per key now (one probe of
-- the endpoint's primary key).
WITH job AS (
    SELECT j.job_id, j.endpoint, j.endpoint_type, j.input, j.endpoint_snapshot, j.on_success,
           j.on_failure, j.ordering_key,
           CASE WHEN en.flow_control -> 'max_concurrency_per_key' IS NOT NULL
                THEN j.concurrency_key END AS concurrency_key
    FROM jobs AS j
    LEFT JOIN endpoints AS en ON en.name = j.endpoint
    WHERE j.job_id = :job_id AND j.trigger_type = 'CRON' AND j.status = 'ACTIVE'
), created AS (
    INSERT INTO executions (job_id, endpoint, endpoint_type, idempotency_key, status,
                            input, run_at, max_attempts, on_success, on_failure,
                            ordering_key, concurrency_key, ordering_wait, ordering_at)
    SELECT job_id, endpoint, endpoint_type, :idempotency_key, 'QUEUED', input, now(),
           COALESCE(CAST(endpoint_snapshot -> 'retry_policy' ->> 'max_attempts' AS BIGINT), 1),
           on_success, on_failure, ordering_key, concurrency_key,
           (ordering_key IS NOT NULL OR concurrency_key IS NOT NULL),
           CASE WHEN ordering_key IS NOT NULL OR concurrency_key IS NOT NULL THEN now() END
    FROM job
    RETURNING execution_id, endpoint, ordering_key, concurrency_key
), logged AS (
    INSERT INTO execution_logs (execution_id, attempt_number, level, message)
    SELECT execution_id, 0, 'INFO', 'Execution created (QUEUED) by a trigger: run now, outside the schedule.'
    FROM created
    RETURNING execution_id
)
SELECT l.execution_id, c.endpoint, c.ordering_key, c.concurrency_key
FROM logged AS l JOIN created AS c ON c.execution_id = l.execution_id

-- name: jobs_pause
-- POST /jobs/{id}/pause: an ACTIVE cron job stops ticking. COALESCE keeps the first
-- paused_at (idempotent). The materializer's due scan and its compare-and-set both require
-- paused_at IS NULL, so a pause racing a tick either commits first (no tick) or finds the
-- tick materialized. cancelled/logged: a tick the scheduler materialized ahead of time
-- (look-ahead: QUEUED, run_at still in the future) must not fire while paused, so it is
-- CANCELLED as jobs_retire does, and gives up the tick's idempotency key (suffixed with its
-- own id, unique however often a tick is paused): a resume before that tick makes it the
-- job's next tick again, and the materializer must then be able to insert it. Keeping the
-- key skipped it silently (ON CONFLICT DO NOTHING), which in the lean profile, whose
-- scheduler looks 75 s ahead, lost the first tick after nearly every pause and resume. A
-- catch-up resume leaves cron_next_run_at past it: a cancelled tick is not caught up.
-- Due and running executions are in flight and continue.
WITH paused AS (
    UPDATE jobs SET paused_at = COALESCE(paused_at, now())
    WHERE job_id = :job_id AND trigger_type = 'CRON' AND status = 'ACTIVE'
    RETURNING job_id
), cancelled AS (
    UPDATE executions AS e
    SET status = 'CANCELLED', completed_at = now(), worker_id = NULL,
        idempotency_key = e.idempotency_key || ':paused:' || CAST(e.execution_id AS TEXT)
    FROM paused AS p
    WHERE e.job_id = p.job_id AND e.status = 'QUEUED' AND e.run_at > now()
    RETURNING e.execution_id, e.attempt_count, e.ordering_key, e.concurrency_key
), logged AS (
    INSERT INTO execution_logs (execution_id, attempt_number, level, message)
    SELECT execution_id, attempt_count, 'INFO', 'Job paused before this tick; execution CANCELLED.'
    FROM cancelled
    RETURNING log_id
)
SELECT job_id, (SELECT count(*) FROM logged) AS cancelled,
       ARRAY(SELECT c.execution_id FROM cancelled AS c
             WHERE c.ordering_key IS NOT NULL OR c.concurrency_key IS NOT NULL) AS keyed
FROM paused

-- name: jobs_resume
-- POST /jobs/{id}/resume of an ACTIVE cron job. Only a paused job moves (idempotent: a
-- running job keeps its schedule). :next_run_at is the job's next tick after now, computed
-- by the service: the ticks missed while paused are skipped. With catch_up it is NULL and
-- cron_next_run_at stays where the pause left it, so the materializer catches the missed
-- ticks up one by one, as after any scheduler outage.
UPDATE jobs
SET paused_at = NULL,
    cron_next_run_at = COALESCE(CAST(:next_run_at AS TIMESTAMPTZ), cron_next_run_at)
WHERE job_id = :job_id AND trigger_type = 'CRON' AND status = 'ACTIVE'
  AND paused_at IS NOT NULL
RETURNING job_id
