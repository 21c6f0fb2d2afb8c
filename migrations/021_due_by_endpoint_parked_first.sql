-- 021_due_by_endpoint_parked_first: idx_executions_due_by_endpoint keyed (parked, endpoint,
-- run_at) instead of (endpoint, parked, run_at); same rows (its predicate is migration 018's).
--
-- Its readers take one endpoint's oldest due rows, parked or not, as a range of its key:
-- the lag probes (metrics.sql), the promoter's parking and unparking, the metered claim,
-- and now the claim while an endpoint is at its cap on a worker (worker.sql,
-- worker_claim_due: each other endpoint's oldest due rows instead of a walk of
-- idx_executions_due past the capped endpoint's backlog, a heap fetch per row). Written as
-- a row comparison led by endpoint, the range was also one idx_executions_by_endpoint
-- (endpoint, status, ...: no run_at) could take a bound from, and under a generic plan that
-- estimates few rows per endpoint PostgreSQL read the endpoint's every due row there and
-- sorted them. Led by parked, the comparison bounds this index only. Equality lookups
-- (parked = p AND endpoint = name, ordered by run_at) read the same range in either order.
DROP INDEX IF EXISTS idx_executions_due_by_endpoint;
CREATE INDEX idx_executions_due_by_endpoint
    ON executions (parked, endpoint, run_at ASC)
    WHERE status IN ('QUEUED', 'RETRYING');
