-- 007_dead_letters: the indexes of GET /executions (the dead-letter view) and of redrive
-- (issue 18, point 3).
--
-- GET /executions lists executions newest first by (created_at, execution_id), filtered by
-- status, endpoint, a created_at range and the last attempt's error type. created_at is the
-- time key because it exists for every status and never changes, so a keyset cursor stays
-- valid while rows change status, and because redrive must move exactly what the view
-- shows for the same filters.

-- A status's executions newest first: the listing with a status filter reads the first
-- page of its status and stops, whatever the size of history (and, without a status filter,
-- one such range per status, merged). Full rather than partial because every status may be
-- asked for; on CockroachDB only a status change writes it, on PostgreSQL it is one more
-- entry per non-HOT update of an execution (status is already indexed, so status changes
-- were never HOT).
CREATE INDEX idx_executions_by_status
    ON executions (status, created_at DESC, execution_id DESC);

-- The dead letters of one endpoint newest first: the view filtered by endpoint, and the
-- range redrive walks. Partial: only FAILED rows have an entry, so a delivery that does not
-- end FAILED never writes it, and a redriven execution leaves it.
CREATE INDEX idx_executions_failed_by_endpoint
    ON executions (endpoint, created_at DESC, execution_id DESC)
    WHERE status = 'FAILED';
