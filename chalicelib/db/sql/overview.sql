-- The operator's overview (GET /overview, the dashboard's first view): read-only
-- aggregates, each one statement, all read in one transaction so the numbers agree. The
-- counts by status and the oldest due execution are metrics.sql's statements.

-- name: overview_last_hour
-- Attempts finished in the last hour, by minute and outcome (a delivery is one attempt).
-- date_trunc('minute', ...) is the same on PostgreSQL and CockroachDB; counting with
-- sum(CASE ...) instead of FILTER keeps it in the subset both accept. One range of
-- idx_attempts_completed (migration 009); the API gets 60 rows, never a row per attempt.
SELECT date_trunc('minute', completed_at) AS minute,
       sum(CASE WHEN status = 'SUCCESS' THEN 1 ELSE 0 END) AS succeeded,
       sum(CASE WHEN status = 'FAILED' THEN 1 ELSE 0 END) AS failed
FROM attempts
WHERE completed_at IS NOT NULL AND completed_at >= CAST(:since AS TIMESTAMPTZ)
GROUP BY date_trunc('minute', completed_at)

-- name: overview_workers
-- Worker processes seen lately: each writes its row of region_heartbeats every 5 s
-- (component "worker@host:pid"); rows of processes gone for longer than the window are
-- history and left out, so a redeployed fleet does not list every old container.
SELECT component, status, last_beat_at
FROM region_heartbeats
WHERE component LIKE 'worker%' AND last_beat_at >= CAST(:since AS TIMESTAMPTZ)
ORDER BY component ASC
LIMIT 100

-- name: overview_endpoint_outcomes
-- Attempts finished in the last hour per endpoint and outcome: the endpoint list's health
-- column. Joined through the attempt's execution by primary key.
SELECT e.endpoint,
       sum(CASE WHEN a.status = 'SUCCESS' THEN 1 ELSE 0 END) AS succeeded,
       sum(CASE WHEN a.status = 'FAILED' THEN 1 ELSE 0 END) AS failed
FROM attempts AS a
JOIN executions AS e ON e.execution_id = a.execution_id
WHERE a.completed_at IS NOT NULL AND a.completed_at >= CAST(:since AS TIMESTAMPTZ)
GROUP BY e.endpoint
ORDER BY e.endpoint ASC
