-- 007_dead_letters: the indexes of GET /executions (the dead-letter view) and of redrive
-- (issue 18, point 3).
--
-- GET /executions lists executions newest first by (created_at, execution_id), filtered by
-- status, endpoint, a created_at range and the last attempt's error type. created_at is the
-- time key because it exists for every status and never changes, so a keyset cursor stays
-- valid while rows change status, and because redrive must move exactly what the view
-- shows for the same filters.

-- Ended executions of one status newest first: the listing of SUCCESS, FAILED (the
-- dead-letter view) or CANCELLED reads the first page of its status in order and stops,
-- whatever the history. Partial on the terminal statuses: an execution gets its entry once,
-- when it ends (on PostgreSQL an index whose predicate a row does not match gets no entry
-- from its updates), so the insert and the claim never write it: one index entry per
-- delivery, where a full index would take one per status change (about three). Live
-- statuses are listed from the partial indexes of live work (idx_executions_pending,
-- idx_executions_pickup, idx_executions_running), so their cost is what is live.
CREATE INDEX idx_executions_ended
    ON executions (status, created_at DESC, execution_id DESC)
    WHERE status IN ('SUCCESS', 'FAILED', 'CANCELLED');

-- The dead letters of one endpoint newest first: the view filtered by endpoint, and the
-- range redrive walks. Partial: only FAILED rows have an entry, so a delivery that does not
-- end FAILED never writes it, and a redriven execution leaves it.
CREATE INDEX idx_executions_failed_by_endpoint
    ON executions (endpoint, created_at DESC, execution_id DESC)
    WHERE status = 'FAILED';
