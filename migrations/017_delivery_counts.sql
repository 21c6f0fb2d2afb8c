-- 017_delivery_counts: what the dashboard and GET /metrics count of deliveries comes from
-- summary rows written with the attempts, not from counting history.
--
-- GET /overview and GET /metrics counted attempts and ended executions by reading every
-- row of the window (an hour of attempts for the dashboard, which polls every 5 s: a
-- second at a million attempts an hour) through idx_attempts_completed and
-- idx_executions_completed, two index entries written per delivery for that read alone.
-- Each finalize statement now adds its batch's counts to one row per (minute, endpoint,
-- attempt outcome, error type) of its own writer: a worker's finalizer thread owns its
-- rows, so no two transactions ever update the same row (on CockroachDB the current
-- minute's rows share a range, written by every worker, but never one row), and a batch of
-- deliveries costs one row update, not an index entry per delivery.
--
-- Grains: 'minute' rows are written by the finalize; the housekeeper folds minute rows
-- older than two hours into 'hour' rows, and hour rows older than two days into one
-- 'total' row per (endpoint, outcome, error type) (bucket_start 1970-01-01), in bounded
-- batches. A reader sums whatever rows cover its window, so the totals never go down
-- (Prometheus counters) and every read is bounded by the traffic's shape (endpoints,
-- workers, error types over two hours and two days), never by history.
--
-- duration_ms is the sum of the attempts' durations; le_* count attempts no longer than
-- each bound (ms), the buckets of a histogram.
CREATE TABLE delivery_counts (
    grain          TEXT          NOT NULL,
    bucket_start   TIMESTAMPTZ   NOT NULL,
    endpoint       TEXT          NOT NULL,
    outcome        TEXT          NOT NULL,
    error_type     TEXT          NOT NULL,
    writer         TEXT          NOT NULL,
    attempts       BIGINT        NOT NULL,
    ended          BIGINT        NOT NULL,
    duration_ms    BIGINT        NOT NULL,
    le_10          BIGINT        NOT NULL,
    le_50          BIGINT        NOT NULL,
    le_100         BIGINT        NOT NULL,
    le_250         BIGINT        NOT NULL,
    le_500         BIGINT        NOT NULL,
    le_1000        BIGINT        NOT NULL,
    le_5000        BIGINT        NOT NULL,
    le_30000       BIGINT        NOT NULL,
    CONSTRAINT pk_delivery_counts
        PRIMARY KEY (grain, bucket_start, endpoint, outcome, error_type, writer),
    CONSTRAINT chk_delivery_counts_grain CHECK (grain IN ('minute', 'hour', 'total')),
    CONSTRAINT chk_delivery_counts_outcome CHECK (outcome IN ('SUCCESS', 'FAILED'))
);

-- The last two days of attempts, so an upgraded deployment's dashboard does not start
-- blank (older history is not summed: counters start at this migration).
INSERT INTO delivery_counts (grain, bucket_start, endpoint, outcome, error_type, writer,
                             attempts, ended, duration_ms, le_10, le_50, le_100, le_250,
                             le_500, le_1000, le_5000, le_30000)
SELECT 'hour', date_trunc('hour', a.completed_at), e.endpoint, a.status,
       COALESCE(a.error ->> 'type', ''), 'migration',
       count(*),
       sum(CASE WHEN e.status = a.status AND a.attempt_number = e.attempt_count
                THEN 1 ELSE 0 END),
       COALESCE(sum(a.duration_ms), 0),
       sum(CASE WHEN a.duration_ms <= 10 THEN 1 ELSE 0 END),
       sum(CASE WHEN a.duration_ms <= 50 THEN 1 ELSE 0 END),
       sum(CASE WHEN a.duration_ms <= 100 THEN 1 ELSE 0 END),
       sum(CASE WHEN a.duration_ms <= 250 THEN 1 ELSE 0 END),
       sum(CASE WHEN a.duration_ms <= 500 THEN 1 ELSE 0 END),
       sum(CASE WHEN a.duration_ms <= 1000 THEN 1 ELSE 0 END),
       sum(CASE WHEN a.duration_ms <= 5000 THEN 1 ELSE 0 END),
       sum(CASE WHEN a.duration_ms <= 30000 THEN 1 ELSE 0 END)
FROM attempts AS a
JOIN executions AS e ON e.execution_id = a.execution_id
WHERE a.completed_at >= now() - INTERVAL '2 days'
GROUP BY date_trunc('hour', a.completed_at), e.endpoint, a.status,
         COALESCE(a.error ->> 'type', '');

-- Nothing reads attempts by completion time any more.
DROP INDEX IF EXISTS idx_attempts_completed;

-- Executions ended by completion time: only cancellations are still counted from rows
-- (they end through the API, not the finalize); SUCCESS and FAILED are delivery_counts'.
-- A partial index that the finalize's updates never write.
CREATE INDEX idx_executions_cancelled
    ON executions (completed_at)
    WHERE status = 'CANCELLED';
DROP INDEX IF EXISTS idx_executions_completed;
