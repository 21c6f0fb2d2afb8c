-- 014_bounded_reads: what lets the listings read a page, not the history or the whole
-- backlog, whatever plan a prepared statement ends up with.
--
-- last_error_type: the error type of the execution's last attempt (attempts.error ->>
-- 'type'), NULL when it succeeded or made no attempt. GET /executions?error_type=X used to
-- probe the last attempt of every row it passed, so a rare or absent type read every dead
-- letter in history; kept on the row, the type is an index key. Written by whatever
-- records an attempt (the worker's finalize, the reclaimer) in the same UPDATE that moves
-- the execution. Rows from before this migration are filled in below; a SUCCESS row's last
-- attempt succeeded (NULL), so the history's bulk is not rewritten.
ALTER TABLE executions ADD COLUMN last_error_type TEXT;

UPDATE executions AS e
SET last_error_type = (
    SELECT a.error ->> 'type'
    FROM attempts AS a
    WHERE a.execution_id = e.execution_id
    ORDER BY a.attempt_number DESC
    LIMIT 1
)
WHERE e.status <> 'SUCCESS' AND e.attempt_count > 0;

-- The executions whose last attempt failed with one error type, by status newest first:
-- GET /executions?status=FAILED&error_type=X (or any status that can carry an error) reads
-- the first page of its range and stops, or finds the range empty at once. Partial on a
-- type being there and on the statuses that keep one: a delivery that succeeds at once
-- never writes it; an attempt that fails writes one entry (RETRYING, or FAILED beside
-- idx_executions_ended in the same non-HOT update), and a claim none (RUNNING is left out:
-- few rows, read on idx_executions_running). PENDING rows have made no attempt.
CREATE INDEX idx_executions_by_error
    ON executions (status, last_error_type, created_at DESC, execution_id DESC)
    WHERE last_error_type IS NOT NULL
      AND status IN ('QUEUED', 'RETRYING', 'FAILED', 'CANCELLED');

-- GET /jobs/{id}/versions walks a job's versions forward (jobs_version_chain: the next
-- version names the one it replaced); without an index each step read the whole jobs
-- table. Partial: only a version made by PUT has a previous one, so creating a job never
-- writes it.
CREATE INDEX idx_jobs_previous_version
    ON jobs (previous_version_id)
    WHERE previous_version_id IS NOT NULL;

-- Executions waiting to run, by status newest first: the listing of PENDING, QUEUED or
-- RETRYING executions (GET /executions, with or without a status) and of the ACTIVE
-- one-shot jobs (GET /jobs?status=ACTIVE, whose created_at is their execution's) read the
-- first page of a status in order and stop, however long the backlog. The other partial
-- indexes of live work are keyed by run_at, so those listings read and sorted the whole
-- backlog. RUNNING rows are left out (they are few, bounded by what the workers hold, and
-- listed from idx_executions_running), so a claim writes no entry here: an execution gets
-- one when it is created (or promoted, retried, requeued), none when it runs or ends.
CREATE INDEX idx_executions_waiting
    ON executions (status, created_at DESC, execution_id DESC)
    WHERE status IN ('PENDING', 'QUEUED', 'RETRYING');
