-- 005_batches: batches of jobs (POST /jobs/batch) and completion callbacks (issue 17).
--
-- A batch row is written once, at creation (its total and its on_complete endpoint), and
-- never again: progress is derived from idx_executions_batch, not kept in counters on this
-- row. On CockroachDB a row that every finalize of a batch updates is a contention hot spot
-- (each finalize would write the same key, serializing the writers of a batch and turning
-- their races into 40001 retries); an index read costs one range scan over the batch's
-- children when someone asks, and nothing on the delivery path.

CREATE TABLE batches (
    batch_id      TEXT          NOT NULL DEFAULT 'batch_' || replace(gen_random_uuid()::TEXT, '-', ''),
    crdb_region   TEXT          NOT NULL DEFAULT 'default',
    total         BIGINT        NOT NULL,
    on_complete   TEXT,
    created_at    TIMESTAMPTZ   NOT NULL DEFAULT now(),
    CONSTRAINT pk_batches PRIMARY KEY (batch_id),
    CONSTRAINT fk_batches_on_complete FOREIGN KEY (on_complete) REFERENCES endpoints (name)
);

-- A job's callbacks are endpoint names (its own, else its endpoint's defaults, resolved at
-- creation). A callback job records the execution it reports on and its depth in a chain
-- of callbacks (the job a client creates is 0; a chain deeper than 3 is refused).
ALTER TABLE jobs ADD COLUMN batch_id TEXT;

ALTER TABLE jobs ADD COLUMN on_success TEXT;

ALTER TABLE jobs ADD COLUMN on_failure TEXT;

ALTER TABLE jobs ADD COLUMN parent_execution_id TEXT;

ALTER TABLE jobs ADD COLUMN callback_depth BIGINT NOT NULL DEFAULT 0;

-- Endpoint defaults for the callbacks of its jobs.
ALTER TABLE endpoints ADD COLUMN on_success TEXT;

ALTER TABLE endpoints ADD COLUMN on_failure TEXT;

-- Copied from the job onto its executions, so the finalize statement learns from the row it
-- already updates whether anything follows (a callback, a batch to check) and a job
-- without either costs nothing more on the delivery path.
ALTER TABLE executions ADD COLUMN batch_id TEXT;

ALTER TABLE executions ADD COLUMN on_success TEXT;

ALTER TABLE executions ADD COLUMN on_failure TEXT;

-- Progress of a batch: counts by status and "is anything not terminal" read here. Partial:
-- executions outside a batch add no entry.
CREATE INDEX idx_executions_batch
    ON executions (batch_id, status)
    WHERE batch_id IS NOT NULL;

-- GET /batches/{id}/jobs: keyset page on (created_at, job_id) within a batch.
CREATE INDEX idx_jobs_batch
    ON jobs (batch_id, created_at DESC, job_id DESC)
    WHERE batch_id IS NOT NULL;

-- job_states (002_lifecycle.sql) with the columns above appended (a view may only grow at
-- its end).
CREATE OR REPLACE VIEW job_states AS
SELECT j.job_id, j.endpoint, j.endpoint_type, j.trigger_type,
       CASE WHEN j.trigger_type = 'CRON' THEN j.status
            WHEN e.status IN ('PENDING', 'QUEUED', 'RUNNING', 'RETRYING') THEN 'ACTIVE'
            ELSE 'RETIRED' END AS status,
       j.version, j.previous_version_id, j.replaced_by_id, j.idempotency_key, j.input,
       j.run_at, j.cron_expression, j.cron_timezone, j.cron_starts_at, j.cron_ends_at,
       j.cron_next_run_at, j.cron_last_tick_at, j.created_at,
       CASE WHEN j.trigger_type = 'CRON' THEN j.retired_at ELSE e.completed_at END AS retired_at,
       j.batch_id, j.on_success, j.on_failure, j.parent_execution_id
FROM jobs AS j
LEFT JOIN LATERAL (
    SELECT x.status, x.completed_at
    FROM executions AS x
    WHERE x.job_id = j.job_id AND j.trigger_type <> 'CRON'
    ORDER BY x.created_at ASC
    LIMIT 1
) AS e ON true;
