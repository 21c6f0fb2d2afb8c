-- 031_ordering_keys: executions of one endpoint that share an ordering key start one at a
-- time, in their order; only each key's head can be claimed.
--
-- jobs.ordering_key / executions.ordering_key: what POST /jobs set (NULL for most jobs; a
-- cron job's ticks carry their job's). executions.ordering_at: the execution's place in its
-- key, fixed at creation (its due time then: now for an IMMEDIATE job, run_at for a
-- DELAYED job or a cron tick), then created_at (the creating transaction's start), then
-- ordering_seq (its item's place in that request). A retry keeps it: a RETRYING head with a
-- later run_at still holds its key.
--
-- executions.ordering_wait: TRUE while the execution waits behind its key's head. Rows
-- nobody may claim leave the indexes the claim walks (as parked rows do, migration 018):
-- idx_executions_due and idx_executions_due_by_endpoint are rebuilt without them, so a hung
-- key with 10^5 executions behind it costs every claim nothing, and a row without a key
-- (ordering_wait FALSE for ever) is in them as before. The statement that ends or re-queues
-- a keyed execution settles its key in the same transaction (chalicelib/services/
-- ordering.py): the next one leaves the wait.
ALTER TABLE jobs ADD COLUMN ordering_key TEXT;
ALTER TABLE executions ADD COLUMN ordering_key TEXT;
ALTER TABLE executions ADD COLUMN ordering_wait BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE executions ADD COLUMN ordering_at TIMESTAMPTZ;
ALTER TABLE executions ADD COLUMN ordering_seq BIGINT;

-- endpoints.ordering: {"on_failure": "skip" | "block"}; NULL is skip.
ALTER TABLE endpoints ADD COLUMN ordering JSONB;

-- One row per (endpoint, key): every statement that decides a key's head writes it first
-- (the lock that orders a creation and a release on one key, in any isolation; touched_at
-- says when), and the housekeeper deletes the rows of keys neither blocked nor touched for
-- a day that have no execution left (housekeeping_prune_ordering_keys), so the table
-- follows the keys in use, not every key ever used. blocked_execution_id / blocked_since: the failed head an
-- endpoint with on_failure "block" waits on, until a retry of it or a skip.
CREATE TABLE ordering_keys (
    endpoint             TEXT          NOT NULL,
    ordering_key         TEXT          NOT NULL,
    blocked_execution_id TEXT,
    blocked_since        TIMESTAMPTZ,
    touched_at           TIMESTAMPTZ   NOT NULL DEFAULT now(),
    CONSTRAINT pk_ordering_keys PRIMARY KEY (endpoint, ordering_key)
);

-- GET /endpoints/{name}/ordering-keys?state=blocked and te_ordering_keys_blocked: the
-- blocked keys only, by endpoint then key (a page is one range).
CREATE INDEX idx_ordering_keys_blocked
    ON ordering_keys (endpoint, ordering_key)
    WHERE blocked_execution_id IS NOT NULL;

-- The housekeeper's prune: keys not blocked, oldest touch first (a page is one range).
CREATE INDEX idx_ordering_keys_idle
    ON ordering_keys (touched_at ASC, endpoint ASC, ordering_key ASC)
    WHERE blocked_execution_id IS NULL;

-- A key's live executions: its head (ordering_wait FALSE, at most one) and the first one
-- waiting behind it, each one probe. Only keyed rows are in it.
CREATE INDEX idx_executions_ordering
    ON executions (endpoint, ordering_key, ordering_wait, ordering_at ASC, created_at ASC,
                   ordering_seq ASC)
    WHERE ordering_key IS NOT NULL
      AND status IN ('PENDING', 'QUEUED', 'RUNNING', 'RETRYING');

-- The claim's walks, without the executions waiting behind their key's head (same keys as
-- migrations 018 and 021).
DROP INDEX IF EXISTS idx_executions_due;
CREATE INDEX idx_executions_due
    ON executions (run_at ASC, execution_id ASC)
    WHERE status IN ('QUEUED', 'RETRYING') AND NOT parked AND NOT ordering_wait;

DROP INDEX IF EXISTS idx_executions_due_by_endpoint;
CREATE INDEX idx_executions_due_by_endpoint
    ON executions (parked, endpoint, run_at ASC)
    WHERE status IN ('QUEUED', 'RETRYING') AND NOT ordering_wait;

-- job_states (027_job_states_delivery.sql) with jobs.ordering_key appended (a view may only
-- grow at its end): a job shows its ordering key wherever it is read.
CREATE OR REPLACE VIEW job_states AS
SELECT j.job_id, j.endpoint, j.endpoint_type, j.trigger_type,
       CASE WHEN j.trigger_type = 'CRON' THEN j.status
            WHEN e.status IN ('PENDING', 'QUEUED', 'RUNNING', 'RETRYING') THEN 'ACTIVE'
            ELSE 'RETIRED' END AS status,
       j.version, j.previous_version_id, j.replaced_by_id, j.idempotency_key, j.input,
       j.run_at, j.cron_expression, j.cron_timezone, j.cron_starts_at, j.cron_ends_at,
       j.cron_next_run_at, j.cron_last_tick_at, j.created_at,
       CASE WHEN j.trigger_type = 'CRON' THEN j.retired_at ELSE e.completed_at END AS retired_at,
       j.batch_id, j.on_success, j.on_failure, j.parent_execution_id, j.paused_at,
       j.schedule_error, j.delivery_overrides, j.ordering_key
FROM jobs AS j
LEFT JOIN LATERAL (
    SELECT x.status, x.completed_at
    FROM executions AS x
    WHERE x.job_id = j.job_id AND j.trigger_type <> 'CRON'
    ORDER BY x.created_at ASC
    LIMIT 1
) AS e ON true;

-- live_jobs (002_lifecycle.sql): the due arm read the claim's partial index of due rows,
-- which no longer holds the executions waiting behind their key's head; those are live
-- work too, and are read from idx_executions_ordering (only keyed rows are in it), so a
-- delete's live-job check still reads the partial indexes of live work, never history.
CREATE OR REPLACE VIEW live_jobs AS
SELECT j.job_id, j.endpoint, j.endpoint_snapshot, j.created_at
FROM jobs AS j
WHERE j.job_id IN (
    SELECT job_id FROM jobs WHERE trigger_type = 'CRON' AND status = 'ACTIVE'
    UNION ALL
    SELECT job_id FROM executions WHERE status IN ('QUEUED', 'RETRYING') AND NOT ordering_wait
    UNION ALL
    SELECT job_id FROM executions
    WHERE ordering_key IS NOT NULL AND ordering_wait
      AND status IN ('PENDING', 'QUEUED', 'RUNNING', 'RETRYING')
    UNION ALL
    SELECT job_id FROM executions WHERE status = 'PENDING'
    UNION ALL
    SELECT job_id FROM executions WHERE status = 'RUNNING'
);
