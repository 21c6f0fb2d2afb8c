-- An endpoint's health counts what GET /jobs/{id}/status counts for a job (jobs_window_stats):
-- executions created since :since, by outcome. The definition is chalicelib/domain/health.py.

-- name: endpoint_health_counts
-- Per endpoint with an execution in the window. One branch per status group, each
-- shaped as a partial index's predicate: ended rows are a range of idx_executions_ended
-- (status, created_at) per status; live rows come from the partial indexes of live rows,
-- whose size is the backlog. No branch reads executions created before :since that ended.
SELECT endpoint,
       count(*) AS total,
       sum(CASE WHEN status = 'SUCCESS' THEN 1 ELSE 0 END) AS succeeded,
       sum(CASE WHEN status = 'FAILED' THEN 1 ELSE 0 END) AS failed
FROM (
    SELECT endpoint, status FROM executions
    WHERE status IN ('SUCCESS', 'FAILED', 'CANCELLED') AND created_at >= CAST(:since AS TIMESTAMPTZ)
    UNION ALL
    SELECT endpoint, status FROM executions
    WHERE status = 'PENDING' AND created_at >= CAST(:since AS TIMESTAMPTZ)
    UNION ALL
    SELECT endpoint, status FROM executions
    WHERE status IN ('QUEUED', 'RETRYING') AND created_at >= CAST(:since AS TIMESTAMPTZ)
    UNION ALL
    SELECT endpoint, status FROM executions
    WHERE status = 'RUNNING' AND created_at >= CAST(:since AS TIMESTAMPTZ)
) AS recent
GROUP BY endpoint
ORDER BY endpoint ASC
