-- 020_endpoint_listings: an endpoint's executions are listed from a range of their own,
-- whatever its share of the history.
--
-- GET /executions?endpoint=NAME and GET /jobs?status=ACTIVE&endpoint=NAME read each
-- status's index in created_at order and filtered the endpoint's rows out of everyone's:
-- for an endpoint with a small share of the traffic, a page read most of the history (or
-- of the live backlog) to find its 51 rows. Only FAILED rows had an index by endpoint.
-- This one covers the waiting statuses and the ends but success, keyed (endpoint, status,
-- created_at), so each such status branch of a listing filtered by endpoint is one range
-- in order, and the redrive's range of an endpoint's dead letters is (endpoint,
-- 'FAILED'). It replaces idx_executions_failed_by_endpoint.
--
-- Its price: an execution gets an entry when it is created (or promoted, retried,
-- requeued), and when it fails or is cancelled, as before; none when it is claimed or
-- succeeds. RUNNING rows are few (bounded by what the workers hold) and read on
-- idx_executions_running; SUCCESS is what nearly every delivery ends in, and an entry
-- there cost each delivery about a tenth more WAL (2,324 -> 2,543 bytes in one A/B run
-- of bench/experiments/worker_ab.py, 3 rounds), so an endpoint's
-- successes are read on idx_executions_ended, filtering the endpoint's out.
CREATE INDEX idx_executions_by_endpoint
    ON executions (endpoint, status, created_at DESC, execution_id DESC)
    WHERE status IN ('PENDING', 'QUEUED', 'RETRYING', 'FAILED', 'CANCELLED');

DROP INDEX IF EXISTS idx_executions_failed_by_endpoint;
