-- 009_metrics: what GET /metrics reads (issue 19, point 4), so the figures come from the
-- database and are right however many API containers, workers and schedulers run.
--
-- Finished work is found by when it finished: executions and attempts get an index on
-- completed_at, so "finished in the last minute" reads one minute of index, never the whole
-- history. Each costs one index entry per execution reaching a terminal status and per
-- attempt recorded (both are written once). On CockroachDB a key that grows with time sends
-- its inserts to one range; at the rates this service writes that is acceptable, and a
-- hash-sharded index (CockroachDB-only syntax) is the remedy if it ever is not.
CREATE INDEX idx_executions_completed
    ON executions (completed_at)
    WHERE completed_at IS NOT NULL;

CREATE INDEX idx_attempts_completed
    ON attempts (completed_at)
    WHERE completed_at IS NOT NULL;

-- The schedulers' countable work that leaves no row of its own to count: cron ticks
-- materialized and executions reclaimed from lost workers. One row per loop iteration that
-- did something (not per execution), written in the transaction that did it, so a row
-- exists exactly when the work committed. The key leads with the event and its time:
-- "this event in the last minute" is one range of the primary key. The housekeeper prunes
-- rows older than a day.
CREATE TABLE metric_events (
    event         TEXT          NOT NULL,
    recorded_at   TIMESTAMPTZ   NOT NULL,
    event_id      TEXT          NOT NULL DEFAULT replace(gen_random_uuid()::TEXT, '-', ''),
    amount        BIGINT        NOT NULL,
    CONSTRAINT pk_metric_events PRIMARY KEY (event, recorded_at, event_id),
    CONSTRAINT chk_metric_event CHECK (event IN ('cron_ticks_materialized', 'reclaimed')),
    CONSTRAINT chk_metric_count CHECK (amount > 0)
);
