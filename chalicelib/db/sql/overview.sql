-- The operator's overview (GET /overview, the dashboard's first view): read-only
-- aggregates, each one statement, all read in one transaction so the numbers agree. The
-- counts by status and the oldest due execution are metrics.sql's statements; what was
-- delivered comes from the summary rows the finalize writes (delivery_counts), never from
-- counting attempts.

-- name: overview_last_hour
-- Attempts finished per minute since :since, by outcome (a delivery is one attempt): a
-- range of delivery_counts' minute rows (migration 017), summed over endpoints and
-- writers; the API gets 60 rows. sum(CASE ...) instead of FILTER: the subset PostgreSQL
-- and CockroachDB both accept.
SELECT bucket_start AS minute,
       sum(CASE WHEN outcome = 'SUCCESS' THEN attempts ELSE 0 END) AS succeeded,
       sum(CASE WHEN outcome = 'FAILED' THEN attempts ELSE 0 END) AS failed
FROM delivery_counts
WHERE grain = 'minute' AND bucket_start >= CAST(:since AS TIMESTAMPTZ)
  AND bucket_start <= CAST(:until AS TIMESTAMPTZ)
GROUP BY bucket_start

-- name: overview_workers
-- Worker processes seen lately: each writes its row of region_heartbeats every 5 s
-- (component "worker@host:pid"); rows of processes gone for longer than the window are
-- history and left out, so a redeployed fleet does not list every old container.
SELECT component, status, last_beat_at
FROM region_heartbeats
WHERE component LIKE 'worker%' AND last_beat_at >= CAST(:since AS TIMESTAMPTZ)
ORDER BY component ASC
LIMIT 100

-- name: overview_endpoint_health
-- Per endpoint, the executions that ended since :since (the health window, a day) by
-- outcome: the summary rows the finalize adds to (delivery_counts: minute rows for the last
-- two hours, hour rows before; two ranges of the primary key). With the live counts of
-- metrics_queue_depth, an endpoint's health (chalicelib/domain/health.py), read at a cost
-- that follows the number of endpoints and workers, never the day's traffic.
SELECT endpoint,
       sum(CASE WHEN outcome = 'SUCCESS' THEN ended ELSE 0 END) AS succeeded,
       sum(CASE WHEN outcome = 'FAILED' THEN ended ELSE 0 END) AS failed
FROM delivery_counts
WHERE grain IN ('minute', 'hour') AND bucket_start >= CAST(:since AS TIMESTAMPTZ)
  AND bucket_start <= CAST(:until AS TIMESTAMPTZ)
GROUP BY endpoint
ORDER BY endpoint ASC
