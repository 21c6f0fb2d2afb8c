-- The parts (CTEs) more than one file's statements include: the claim's fairness, take and
-- returned rows (worker.sql's and worker_capped.sql's claims) and the finalize's record
-- (worker.sql, worker_capped.sql; "counted" also housekeeping.sql's roll-up). A file
-- includes its own parts and these only (chalicelib/db/queries.py).

-- part: ranked
-- The due candidates ("picked") numbered per endpoint, oldest first, for "fair".
ranked AS (
    SELECT execution_id, endpoint,
           row_number() OVER (PARTITION BY endpoint ORDER BY run_at ASC) AS rank
    FROM picked
)

-- part: fair
-- Per-endpoint fairness, shared by both claim strategies (after "ranked", which numbers
-- their "picked" CTE of due candidates per endpoint, oldest first): "fair"
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
fair AS (
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

-- part: claimed
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

-- part: claim_rows
-- What a claim returns (after the "claimed" CTE): each claimed execution
-- with its job's endpoint snapshot (the endpoint as it is now when a retry asked for its
-- current definition: endpoint_version), its endpoint's cap, the job's own headers and
-- trace context (migration 023) and its own delivery settings (delivery_overrides:
-- migration 025), all NULL for most jobs and read on the same probe of the job. Two
-- numbers for the worker's deadlines, in the database's clock and only where they apply:
-- late_ms, how long after its due time a first attempt of a job with expire_after starts
-- (the worker does not send it once too late), and retry_elapsed_ms, how long ago a
-- retried execution's first attempt started (max_retry_duration_ms).
claim_rows AS (
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
)

-- part: done
-- The record of a finalize batch, in five CTEs (for worker_finalize_batch and
-- worker_record_and_claim): "done" reads the results, "moved" moves each execution on,
-- "attempted" writes its attempt, "additions" and "counted" add them to this writer's
-- summary rows. What that means is worker_finalize_batch's comment.
-- "done": the batch's results (:results, a JSONB array), a row per execution.
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
)

-- part: moved
-- The record's "moved" (see "done"): each execution moved on, a compare-and-set on
-- (RUNNING, :worker_id, attempt_count).
moved AS (
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
)

-- part: attempted
-- The record's "attempted" (see "done"): each moved execution's attempt row.
attempted AS (
    INSERT INTO attempts (execution_id, attempt_number, status, started_at, completed_at,
                          duration_ms, output, error, log_level, log_message)
    SELECT d.execution_id, d.attempt_number, d.attempt_status, d.started_at, d.completed_at,
           d.duration_ms, d.output, d.error, d.log_level,
           d.log_message || ' [worker ' || CAST(:worker_id AS TEXT) || ']'
    FROM done AS d
    JOIN moved AS m ON m.execution_id = d.execution_id
    ON CONFLICT (execution_id, attempt_number) DO NOTHING
)

-- part: additions
-- The record's "additions" (see "done"): the batch's attempts per endpoint, outcome and
-- error type, as rows of delivery_counts for "counted".
additions AS (
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
)

-- part: counted
-- Adds the rows of the including statement's "additions" CTE (delivery_counts' columns,
-- in order, at most one row per key) to the summary rows: a new key is inserted, an
-- existing one has each count increased (migration 017).
counted AS (
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
)

-- part: record_and_claim_rows
-- What worker_record_and_claim (and its capped twin) returns: "claimed" rows (the claim's
-- columns) and a "recorded" one per execution the record moved on.
record_and_claim_rows AS (
    SELECT 'claimed' AS kind, r.*
    FROM claim_rows AS r
    UNION ALL
    SELECT 'recorded', m.execution_id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
           NULL, NULL, NULL, NULL, NULL, NULL, NULL
    FROM moved AS m
)

-- part: logs
-- Shared by both purges and the bulk delete (after their "doomed" CTE of execution ids,
-- locked), in three CTEs, children first (foreign keys): "logs", "tries", "execs", the
-- executions with their logs and attempts, each a DELETE on its by-execution index. The page
-- is matched as an array (= ANY(ARRAY(...))), an index condition in every plan: as IN
-- (SELECT ...), a plan that misjudged the page's size hashed it against a sequential scan
-- of the table.
logs AS (
    DELETE FROM execution_logs
    WHERE execution_id = ANY(ARRAY(SELECT execution_id FROM doomed))
    RETURNING log_id
)

-- part: tries
-- The purge's attempts (see "logs").
tries AS (
    DELETE FROM attempts WHERE execution_id = ANY(ARRAY(SELECT execution_id FROM doomed))
    RETURNING attempt_id
)

-- part: execs
-- The purge's executions, after their logs and attempts (see "logs").
execs AS (
    DELETE FROM executions WHERE execution_id = ANY(ARRAY(SELECT execution_id FROM doomed))
    RETURNING execution_id
)

-- part: requeued
-- The requeue of the executions in "targets" (the including statement's CTE: one id for
-- dead_letters_retry, a page of ids for operations_retry_page, a batch for
-- dead_letters_redrive_batch): QUEUED and due now (a worker claims it on its next poll, or
-- at once when woken), with a new attempt budget on top of the attempts made: attempt_count is kept, so attempt numbers continue and the history stays, and
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
-- The guard is the transition table's terminal sources of QUEUED (:sources, FAILED) and a
-- live endpoint (a deleted endpoint takes no new work), probed per row (OFFSET 0 keeps the
-- subquery a probe: as a join, the generic plan walked every endpoint and probed the page
-- once per endpoint). The targets are primary key probes (= ANY of their array), whatever
-- their number.
requeued AS (
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
    WHERE e.execution_id = ANY(ARRAY(SELECT t.execution_id FROM targets AS t))
      AND e.status = ANY(CAST(:sources AS TEXT[]))
      AND EXISTS (SELECT 1 FROM endpoints AS en
                  WHERE en.name = e.endpoint AND en.deleted_at IS NULL OFFSET 0)
    RETURNING e.execution_id, e.attempt_count, e.max_attempts, e.ordering_key,
              e.concurrency_key
)

-- part: requeue_logged
-- One INFO line per execution "requeued" moved (in the same statement, for exactly the rows
-- that moved), numbered with the last attempt made, saying which attempts the new budget
-- allows.
requeue_logged AS (
    INSERT INTO execution_logs (execution_id, attempt_number, level, message)
    SELECT execution_id, attempt_count, 'INFO',
           :message || ' Attempts ' || CAST(attempt_count + 1 AS TEXT) || ' to '
               || CAST(max_attempts AS TEXT) || ' allowed.'
    FROM requeued
    RETURNING log_id
)

-- part: dead_letters_rows
-- The rows GET /executions lists, one status at a time: an execution and its last
-- attempt's error (recorded redacted by the worker), read per row on
-- uq_attempts_exec_number, and the listing's optional filters. Each tagged line ("-- if
-- <param>") is kept only when its parameter is given (chalicelib/db/shapes.py), so every
-- filter shape is a statement of its own whose generic plan is as good as its custom one:
-- since, until and the cursor bound the range of the index being read (created_at is its
-- key after the status), and the error type is the row's last_error_type (migration 014),
-- a key of idx_executions_by_error for the statuses that keep one, never a probe of each
-- row's attempts. NOT MATERIALIZED: each branch of dead_letters_list_page and
-- dead_letters_list_of_endpoint_page that selects from it is planned as if these lines
-- were written in it (PostgreSQL and CockroachDB inline it), so each reads its own index
-- range to a page and stops; materialized, it would be read whole, once.
dead_letters_rows AS NOT MATERIALIZED (
    SELECT e.execution_id, e.job_id, e.endpoint, e.endpoint_type, e.status, e.input,
           e.output, e.attempt_count, e.max_attempts, e.run_at, e.started_at,
           e.completed_at, e.duration_ms, e.created_at, last.error
    FROM executions AS e
    LEFT JOIN LATERAL (
        SELECT a.error FROM attempts AS a WHERE a.execution_id = e.execution_id
        ORDER BY a.attempt_number DESC LIMIT 1
    ) AS last ON true
    WHERE TRUE
      AND e.endpoint = :endpoint                                    -- if endpoint
      AND e.created_at >= :since                                    -- if since
      AND e.created_at < :until                                     -- if until
      AND e.last_error_type = :error_type                           -- if error_type
      AND (e.created_at, e.execution_id) < (:after_ts, :after_id)   -- if after_ts
)

-- part: dead_letters_running_or_succeeded
-- The two branches both pages read alike (dead_letters_list_page and
-- dead_letters_list_of_endpoint_page), each cut to a page: RUNNING rows, few (what the
-- workers hold), read whole on idx_executions_running; SUCCESS rows on
-- idx_executions_ended (an endpoint's successes have no entry in idx_executions_by_endpoint:
-- migration 020 says why). NOT MATERIALIZED, as dead_letters_rows: each branch is planned
-- where the page reads it.
dead_letters_running_or_succeeded AS NOT MATERIALIZED (
    (SELECT * FROM dead_letters_rows AS r WHERE r.status = 'RUNNING' AND 'RUNNING' = ANY(CAST(:statuses AS TEXT[]))
     ORDER BY r.created_at DESC, r.execution_id DESC LIMIT :limit_plus_one)
    UNION ALL
    (SELECT * FROM dead_letters_rows AS r WHERE r.status = 'SUCCESS' AND 'SUCCESS' = ANY(CAST(:statuses AS TEXT[]))
     ORDER BY r.created_at DESC, r.execution_id DESC LIMIT :limit_plus_one)
)

-- part: dead_letters_list_of_endpoint_page
-- GET /executions?endpoint=NAME (with any other filter): the same rows, filters and order
-- as dead_letters_list (dead_letters_rows), each status asked for (:statuses) one range of
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
dead_letters_list_of_endpoint_page AS (
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
            SELECT * FROM dead_letters_rows AS r
            WHERE r.status = st.status
              AND r.status IN ('PENDING', 'QUEUED', 'RETRYING', 'FAILED', 'CANCELLED')
            ORDER BY r.created_at DESC, r.execution_id DESC
            LIMIT :limit_plus_one
        ) AS x
        UNION ALL
        SELECT * FROM dead_letters_running_or_succeeded
    ) AS newest
    ORDER BY newest.created_at DESC, newest.execution_id DESC
    LIMIT :limit_plus_one
)

-- part: dead_letters_list_page
-- GET /executions: newest first by (created_at, execution_id), keyset-paginated. One
-- branch per status (its rows: dead_letters_rows), each cut at the page size, then merged
-- and cut again. A branch names its status as a literal so that it reads its status's
-- partial index in order: the ended ones idx_executions_ended, the waiting ones
-- idx_executions_waiting, both keyed (status, created_at DESC, execution_id DESC), and
-- with an error type idx_executions_by_error: the first page and stop, whatever the
-- history or the backlog. RUNNING rows are few (what the workers hold), read whole on
-- idx_executions_running. A status not asked for (:statuses) has a branch that is false
-- at once (a one-time filter on a parameter, in a generic plan as in a custom one). With
-- an endpoint: dead_letters_list_of_endpoint.
dead_letters_list_page AS (
    SELECT p.execution_id, p.job_id, p.endpoint, p.endpoint_type, p.status, p.input, p.output,
           p.attempt_count, p.max_attempts, p.run_at, p.started_at, p.completed_at,
           p.duration_ms, p.created_at, p.error
    FROM (
        (SELECT * FROM dead_letters_rows AS r WHERE r.status = 'PENDING' AND 'PENDING' = ANY(CAST(:statuses AS TEXT[]))
         ORDER BY r.created_at DESC, r.execution_id DESC LIMIT :limit_plus_one)
        UNION ALL
        (SELECT * FROM dead_letters_rows AS r WHERE r.status = 'QUEUED' AND 'QUEUED' = ANY(CAST(:statuses AS TEXT[]))
         ORDER BY r.created_at DESC, r.execution_id DESC LIMIT :limit_plus_one)
        UNION ALL
        (SELECT * FROM dead_letters_rows AS r WHERE r.status = 'RETRYING' AND 'RETRYING' = ANY(CAST(:statuses AS TEXT[]))
         ORDER BY r.created_at DESC, r.execution_id DESC LIMIT :limit_plus_one)
        UNION ALL
        (SELECT * FROM dead_letters_rows AS r WHERE r.status = 'FAILED' AND 'FAILED' = ANY(CAST(:statuses AS TEXT[]))
         ORDER BY r.created_at DESC, r.execution_id DESC LIMIT :limit_plus_one)
        UNION ALL
        (SELECT * FROM dead_letters_rows AS r WHERE r.status = 'CANCELLED' AND 'CANCELLED' = ANY(CAST(:statuses AS TEXT[]))
         ORDER BY r.created_at DESC, r.execution_id DESC LIMIT :limit_plus_one)
        UNION ALL
        SELECT * FROM dead_letters_running_or_succeeded
    ) AS p
    ORDER BY p.created_at DESC, p.execution_id DESC
    LIMIT :limit_plus_one
)

-- part: metrics_oldest_due_run_at
-- The run_at of the oldest due execution that is not a paused endpoint's (the lag of
-- GET /overview, of /metrics' te_oldest_due_lag_seconds and of the queue_health line):
-- the head of idx_executions_due, which holds no parked row, walked in run_at order past
-- the rows of paused (or deleted) endpoints that the promoter has not parked yet (it
-- parks them within a pass: the bound the worker's claim has on the same walk); the oldest
-- parked row of each endpoint that has some and is not paused (a held or flow-controlled
-- endpoint's parked backlog is due and waiting: lag, as metrics_endpoint_lag counts it);
-- the oldest due PENDING row not yet promoted (idx_executions_pending's first entry); and the
-- oldest cron tick not yet materialized (idx_jobs_cron_due's first entry past paused jobs,
-- as the materializer's scan): with no scheduler running, a tick that is never
-- materialized has no execution to be late, and the lag must still grow.
-- The minimum of metrics_endpoint_lag's values and that PENDING head, read in a few probes
-- instead of two per endpoint (only /metrics needs each endpoint's lag).
-- parked: the run_at of endpoint en's oldest due parked row (none unless
-- en.parked_rows), one probe of idx_executions_due_by_endpoint, as
-- metrics_endpoint_lag's "parked" probes it (the two change together).
metrics_oldest_due_run_at AS (
    SELECT min(t.run_at) AS oldest_run_at
    FROM (
        SELECT head.run_at
        FROM (
            SELECT x.run_at
            FROM executions AS x
            JOIN endpoints AS en ON en.name = x.endpoint
            WHERE x.status IN ('QUEUED', 'RETRYING') AND NOT x.ordering_wait AND NOT x.parked
              AND x.run_at <= CAST(:now AS TIMESTAMPTZ)
              AND en.paused_at IS NULL AND en.deleted_at IS NULL
            ORDER BY x.run_at ASC, x.execution_id ASC
            LIMIT 1
        ) AS head
        UNION ALL
        SELECT parked.run_at
        FROM endpoints AS en
        JOIN LATERAL (
        SELECT x.run_at
        FROM executions AS x
        WHERE en.parked_rows
          AND x.status IN ('QUEUED', 'RETRYING') AND NOT x.ordering_wait
          AND x.parked AND x.endpoint = en.name AND x.run_at <= CAST(:now AS TIMESTAMPTZ)
        ORDER BY x.parked ASC, x.endpoint ASC, x.run_at ASC
        LIMIT 1
        ) AS parked ON TRUE
        WHERE en.parked_rows AND en.paused_at IS NULL AND en.deleted_at IS NULL
        UNION ALL
        SELECT min(p.run_at) AS run_at
        FROM executions AS p
        WHERE p.status = 'PENDING' AND p.run_at <= CAST(:now AS TIMESTAMPTZ)
        UNION ALL
        SELECT tick.cron_next_run_at AS run_at
        FROM (
            SELECT j.cron_next_run_at
            FROM jobs AS j
            WHERE j.trigger_type = 'CRON' AND j.status = 'ACTIVE'
              AND j.cron_next_run_at <= CAST(:now AS TIMESTAMPTZ)
              AND j.paused_at IS NULL
            ORDER BY j.cron_next_run_at ASC
            LIMIT 1
        ) AS tick
    ) AS t
)

-- part: metrics_queue_depth
-- Non-terminal executions by status and endpoint: the waiting ones (PENDING, QUEUED,
-- RETRYING) as the delayed promoter last counted them into live_counts (every 15 s,
-- migration 018: a row per endpoint and status, so this read follows the number of
-- endpoints, not the backlog), the RUNNING ones counted now on idx_executions_running
-- (bounded by the workers' slots). One JSON array of [status, endpoint, n].
metrics_queue_depth AS (
    SELECT COALESCE(
               json_agg(json_build_array(d.status, d.endpoint, d.n) ORDER BY d.status, d.endpoint),
               CAST('[]' AS JSON)
           ) AS depth
    FROM (
        SELECT status, endpoint, n
        FROM live_counts
        UNION ALL
        SELECT status, endpoint, count(*) AS n
        FROM executions
        WHERE status = 'RUNNING'
        GROUP BY status, endpoint
    ) AS d
)
