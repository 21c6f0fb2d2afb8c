-- 006_operator_controls: pause and resume, flow control per endpoint (issue 18, points 1-2).
--
-- Pause is a timestamp, not a status: a paused endpoint or cron job keeps every other field
-- as it is, and resuming is clearing one column. The claim reads an endpoint's paused_at and
-- held_until on the endpoints row it already joins for the per-endpoint cap, so a pause
-- committed before a claim starts is honoured by that claim, on every worker.

-- paused_at: POST /endpoints/{name}/pause (NULL: running). held_until: a 429 or 503 with
-- Retry-After held the whole endpoint back until then (the finalize writes it; never in the
-- past once passed, it simply stops mattering). flow_control: the definition's
-- {"rate_limit": {"limit", "period_ms"}, "max_concurrency"}, NULL when the endpoint sets
-- none (the claim's fast path takes only endpoints where it is NULL).
ALTER TABLE endpoints ADD COLUMN paused_at TIMESTAMPTZ;

ALTER TABLE endpoints ADD COLUMN held_until TIMESTAMPTZ;

ALTER TABLE endpoints ADD COLUMN flow_control JSONB;

-- Workers read the few endpoints that are paused, held or flow-controlled once per poll
-- (worker_controlled_endpoints); partial, so the index holds only those.
CREATE INDEX idx_endpoints_controlled
    ON endpoints (name)
    WHERE paused_at IS NOT NULL OR held_until IS NOT NULL OR flow_control IS NOT NULL;

-- A cron job's pause: the materializer skips it while set.
ALTER TABLE jobs ADD COLUMN paused_at TIMESTAMPTZ;

-- The cluster-wide state of an endpoint's flow control, one row per endpoint that has (or
-- had) flow_control, written when the endpoint is. Apart from the endpoints row so that the
-- claims that lock and debit it never contend with the API's reads and writes of the
-- definition. tokens/refilled_at: the rate limit's token bucket (refilled at
-- limit/period_ms, at most limit held). The row lock itself serializes the claims of the
-- endpoint across workers, which is what makes max_concurrency's count exact.
CREATE TABLE endpoint_flow (
    endpoint      TEXT          NOT NULL,
    crdb_region   TEXT          NOT NULL DEFAULT 'default',
    tokens        FLOAT8        NOT NULL DEFAULT 0,
    refilled_at   TIMESTAMPTZ   NOT NULL DEFAULT now(),
    CONSTRAINT pk_endpoint_flow PRIMARY KEY (endpoint),
    CONSTRAINT fk_endpoint_flow_endpoint FOREIGN KEY (endpoint) REFERENCES endpoints (name)
);

-- The flow-controlled claim takes an endpoint's own due executions, oldest first. Without
-- this index it would walk idx_executions_due past every other endpoint's backlog to find
-- them. Partial like idx_executions_due: only QUEUED/RETRYING rows are in it.
CREATE INDEX idx_executions_due_by_endpoint
    ON executions (endpoint, run_at ASC)
    WHERE status IN ('QUEUED', 'RETRYING');

-- job_states (005_batches.sql) with paused_at appended (a view may only grow at its end).
CREATE OR REPLACE VIEW job_states AS
SELECT j.job_id, j.endpoint, j.endpoint_type, j.trigger_type,
       CASE WHEN j.trigger_type = 'CRON' THEN j.status
            WHEN e.status IN ('PENDING', 'QUEUED', 'RUNNING', 'RETRYING') THEN 'ACTIVE'
            ELSE 'RETIRED' END AS status,
       j.version, j.previous_version_id, j.replaced_by_id, j.idempotency_key, j.input,
       j.run_at, j.cron_expression, j.cron_timezone, j.cron_starts_at, j.cron_ends_at,
       j.cron_next_run_at, j.cron_last_tick_at, j.created_at,
       CASE WHEN j.trigger_type = 'CRON' THEN j.retired_at ELSE e.completed_at END AS retired_at,
       j.batch_id, j.on_success, j.on_failure, j.parent_execution_id, j.paused_at
FROM jobs AS j
LEFT JOIN LATERAL (
    SELECT x.status, x.completed_at
    FROM executions AS x
    WHERE x.job_id = j.job_id AND j.trigger_type <> 'CRON'
    ORDER BY x.created_at ASC
    LIMIT 1
) AS e ON true;
