-- 032_concurrency_keys: at most flow_control.max_concurrency_per_key executions of one
-- endpoint that share a concurrency key run at once, across all workers; keys take turns.
--
-- jobs.concurrency_key: what POST /jobs set (NULL for most jobs; a cron job's ticks carry
-- their job's), kept whatever the endpoint's flow control. executions.concurrency_key: the
-- job's key, only when the endpoint limited executions per key when the execution was
-- created (the execution is then "gated"); NULL otherwise, so a key on an endpoint
-- without a limit costs nothing and limits nothing.
--
-- executions.ordering_wait (migration 031) now means "waits for its key's turn": behind an
-- ordering key's head, or for room in its concurrency key. It is reused rather than
-- joined by a second flag because the claim's partial indexes (idx_executions_due,
-- idx_executions_due_by_endpoint) and every claim statement already leave such rows out:
-- the claim is not changed, and a key with 10^5 executions waiting for room costs every
-- claim nothing. A gated execution is born waiting, placed as a keyed one is (ordering_at,
-- created_at, ordering_seq); the statement that creates, ends or re-queues it settles its
-- key in the same transaction (chalicelib/services/keys.py, concurrency_settle), which
-- releases the first waiting ones by place while the key has room. A released row
-- re-enters the due queue at its release time (run_at), which is what makes keys take
-- turns.
ALTER TABLE jobs ADD COLUMN concurrency_key TEXT;
ALTER TABLE executions ADD COLUMN concurrency_key TEXT;

-- One row per (endpoint, key): the lock that orders a creation and a release on one key
-- (every statement that settles a key writes it first, ON CONFLICT DO UPDATE SET
-- touched_at, exactly as ordering_keys), and the housekeeper deletes the rows of keys not
-- touched for a day that have no live execution left (housekeeping_prune_concurrency_keys).
CREATE TABLE concurrency_keys (
    endpoint        TEXT          NOT NULL,
    concurrency_key TEXT          NOT NULL,
    touched_at      TIMESTAMPTZ   NOT NULL DEFAULT now(),
    CONSTRAINT pk_concurrency_keys PRIMARY KEY (endpoint, concurrency_key)
);

-- The housekeeper's prune: oldest touch first (a page is one range).
CREATE INDEX idx_concurrency_keys_idle
    ON concurrency_keys (touched_at ASC, endpoint ASC, concurrency_key ASC);

-- A key's live gated executions, for the settle's probes: those holding room
-- (ordering_wait FALSE), counted up to a bound, and those waiting, by place. Only gated,
-- live rows are in it, so a key's history never lengthens a probe.
CREATE INDEX idx_executions_concurrency
    ON executions (endpoint, concurrency_key, ordering_wait, ordering_at ASC, created_at ASC,
                   ordering_seq ASC)
    WHERE concurrency_key IS NOT NULL
      AND status IN ('PENDING', 'QUEUED', 'RUNNING', 'RETRYING');

-- job_states (031_ordering_keys.sql) with jobs.concurrency_key appended (a view may only
-- grow at its end): a job shows its concurrency key wherever it is read.
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
       j.schedule_error, j.delivery_overrides, j.ordering_key, j.concurrency_key
FROM jobs AS j
LEFT JOIN LATERAL (
    SELECT x.status, x.completed_at
    FROM executions AS x
    WHERE x.job_id = j.job_id AND j.trigger_type <> 'CRON'
    ORDER BY x.created_at ASC
    LIMIT 1
) AS e ON true;

-- live_jobs (031_ordering_keys.sql): executions waiting for room in their concurrency key
-- are live work too, outside the due index; they are read from idx_executions_concurrency
-- (only gated rows are in it), as those behind an ordering key's head are read from
-- idx_executions_ordering.
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
    SELECT job_id FROM executions
    WHERE concurrency_key IS NOT NULL AND ordering_wait
      AND status IN ('PENDING', 'QUEUED', 'RUNNING', 'RETRYING')
    UNION ALL
    SELECT job_id FROM executions WHERE status = 'PENDING'
    UNION ALL
    SELECT job_id FROM executions WHERE status = 'RUNNING'
);
