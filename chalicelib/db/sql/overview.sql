-- The operator's overview (GET /overview, the dashboard's first view): read-only
-- aggregates, each a part of one statement (overview_snapshot, below) so the numbers
-- agree and the dashboard's poll is one round trip, as metrics_snapshot is for /metrics.
-- The counts by status and the oldest due execution are metrics.sql's parts; what was
-- delivered comes from the summary rows (delivery_counts, migrations 017 and 019): the
-- housekeeper's roll-ups plus the few minutes of each writer's rows not rolled up yet,
-- never from counting attempts, and never a row per minute of the window per endpoint.

-- name: overview_last_hour
-- The queue_health line's last minute (chalicelib/scheduler/queue_health.py); GET /overview
-- reads the hour in overview_snapshot.
WITH
-- include: overview_last_hour_rows
SELECT minute, succeeded, failed FROM overview_last_hour_rows

-- part: overview_last_hour_rows
-- Attempts finished per minute in [:series_since, :until], by outcome (a delivery is one
-- attempt): the 'series' rows of the minutes rolled up (one per minute and outcome, all
-- endpoints together) and the writers' minute rows of those not rolled up yet (the last
-- few), two ranges of the primary key; the API gets 60 rows. sum(CASE ...) instead of
-- FILTER: the subset PostgreSQL and CockroachDB both accept.
overview_last_hour_rows AS (
    SELECT bucket_start AS minute,
           sum(CASE WHEN outcome = 'SUCCESS' THEN attempts ELSE 0 END) AS succeeded,
           sum(CASE WHEN outcome = 'FAILED' THEN attempts ELSE 0 END) AS failed
    FROM delivery_counts
    WHERE grain IN ('series', 'minute') AND bucket_start >= CAST(:series_since AS TIMESTAMPTZ)
      AND bucket_start <= CAST(:until AS TIMESTAMPTZ)
    GROUP BY bucket_start
)

-- part: overview_workers
-- Worker processes seen lately: each writes its row of region_heartbeats every 5 s
-- (component "worker@host:pid"); rows of processes gone for longer than the window are
-- history and left out, so a redeployed fleet does not list every old container.
overview_workers AS (
    SELECT component, status, last_beat_at
    FROM region_heartbeats
    WHERE component LIKE 'worker%' AND last_beat_at >= CAST(:workers_since AS TIMESTAMPTZ)
    ORDER BY component ASC
    LIMIT 100
)

-- part: overview_endpoint_health
-- Per endpoint, the executions that ended in the last day by outcome: its totals now,
-- less the last hourly mark of its totals at or before :health_since (delivery_marks; the window
-- is then 24 to 25 hours; none in the two hours before :health_since, as in a deployment younger
-- than a day: all of them), plus its writers' minute rows not rolled up yet. A row per endpoint, outcome and error type and a few minutes of writers' rows,
-- whatever the day's traffic; endpoints with nothing in the window are left out. With the live counts of metrics_queue_depth,
-- an endpoint's health (chalicelib/domain/health.py); summed, the overview's day of
-- SUCCESS and FAILED. One JSON array of [endpoint, succeeded, failed], as metrics.sql's
-- per-endpoint reads.
overview_endpoint_health AS (
    WITH mark AS (
        SELECT max(hour) AS at
        FROM delivery_marks
        WHERE hour >= CAST(:health_since AS TIMESTAMPTZ) - INTERVAL '2 hours'
          AND hour <= CAST(:health_since AS TIMESTAMPTZ)
    ), counted AS (
        SELECT endpoint, outcome, ended FROM delivery_counts WHERE grain IN ('total', 'minute')
        UNION ALL
        SELECT endpoint, outcome, -ended FROM delivery_marks WHERE hour = (SELECT at FROM mark)
    ), health AS (
        SELECT endpoint,
               sum(CASE WHEN outcome = 'SUCCESS' THEN ended ELSE 0 END) AS succeeded,
               sum(CASE WHEN outcome = 'FAILED' THEN ended ELSE 0 END) AS failed
        FROM counted
        GROUP BY endpoint
        HAVING sum(ended) <> 0
    )
    SELECT COALESCE(
               json_agg(json_build_array(h.endpoint, h.succeeded, h.failed) ORDER BY h.endpoint),
               CAST('[]' AS JSON)
           ) AS health
    FROM health AS h
)

-- part: overview_cancelled_since
-- Executions cancelled in [:cancelled_since, :until]: one range of idx_executions_cancelled
-- (cancellations end through the API, not the finalize, so no summary row counts them).
overview_cancelled_since AS (
    SELECT count(*) AS n
    FROM executions
    WHERE status = 'CANCELLED' AND completed_at >= CAST(:cancelled_since AS TIMESTAMPTZ)
      AND completed_at <= CAST(:until AS TIMESTAMPTZ)
)

-- name: overview_snapshot
-- Everything GET /overview shows in one statement (chalicelib/services/overview.py), each
-- figure a scalar subquery over a part (a CTE): the waiting and running counts, each endpoint's
-- day of outcomes, the cancellations since :cancelled_since, the lag of the oldest due
-- execution (seconds past :now), the minutes since :series_since and the workers seen since
-- :workers_since. Row sets are JSON arrays in a stated order (timestamps as ISO text).
WITH
-- include: metrics_queue_depth
, -- include: overview_endpoint_health
, -- include: overview_cancelled_since
, -- include: metrics_oldest_due_run_at
, -- include: overview_last_hour_rows
, -- include: overview_workers
SELECT
    (SELECT depth FROM metrics_queue_depth) AS depth,
    (SELECT health FROM overview_endpoint_health) AS health,
    (SELECT n FROM overview_cancelled_since) AS cancelled,
    (
        SELECT EXTRACT(EPOCH FROM CAST(:now AS TIMESTAMPTZ) - o.oldest_run_at)
        FROM metrics_oldest_due_run_at AS o
    ) AS oldest_lag,
    (
        SELECT COALESCE(
                   json_agg(json_build_array(m.minute, m.succeeded, m.failed) ORDER BY m.minute),
                   CAST('[]' AS JSON)
               )
        FROM overview_last_hour_rows AS m
    ) AS last_hour,
    (
        SELECT COALESCE(
                   json_agg(
                       json_build_array(w.component, w.status, w.last_beat_at)
                       ORDER BY w.component
                   ),
                   CAST('[]' AS JSON)
               )
        FROM overview_workers AS w
    ) AS workers
