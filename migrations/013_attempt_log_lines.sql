-- 013_attempt_log_lines: an attempt's log line is kept on its attempts row, and two indexes
-- that another one serves go.
--
-- Every attempt the worker records had two rows written with it: the attempts row and an
-- execution_logs row saying how it ended ("Attempt 2 failed (...); attempt 3 of 5
-- scheduled in 800 ms"), each with its heap tuple and its index entries (attempts:
-- pk_attempts, uq_attempts_exec_number, idx_attempts_completed; execution_logs:
-- pk_execution_logs, idx_logs_by_execution, idx_logs_by_attempt). That log row was a fifth
-- of the WAL the database wrote per delivery. The line now travels on the attempts row
-- (log_level, log_message, written by the same INSERT), and GET /executions/{id}/logs reads
-- the execution's log rows and its attempts' lines as one list (executions_logs_page), in
-- the same order and with the same fields as before: the line's id is the attempt's id,
-- its time the attempt's record time (the same transaction's now() the log row had).
-- Lines that are not about a finished attempt (created, claimed back, cancelled,
-- redriven, a callback's origin) stay execution_logs rows. Attempts recorded before this
-- migration keep their lines in execution_logs and have NULL here: nothing is read twice.
ALTER TABLE attempts ADD COLUMN log_level TEXT;
ALTER TABLE attempts ADD COLUMN log_message TEXT;
ALTER TABLE attempts ADD CONSTRAINT chk_attempt_log_level
    CHECK (log_level IS NULL OR log_level IN ('DEBUG', 'INFO', 'WARN', 'ERROR'));

-- idx_executions_pickup is (status, run_at) WHERE status IN ('QUEUED', 'RETRYING').
-- idx_executions_due (migration 004) has the same predicate keyed by (run_at,
-- execution_id): it serves the specification's pickup query (due rows oldest first, with
-- or without a status) in order, which the status-led key could not, and every count or
-- listing of QUEUED/RETRYING rows the pickup index served. Replaced, as the specification
-- allows for an index serving the same query: one index entry less per execution entering
-- QUEUED or RETRYING (every POST /jobs, every retry).
DROP INDEX IF EXISTS idx_executions_pickup;

-- idx_logs_by_attempt (execution_id, attempt_number, logged_at) had no reader: an
-- execution's logs are read in time order on idx_logs_by_execution (execution_id,
-- logged_at), which has the same leading key. One index entry less per log row.
DROP INDEX IF EXISTS idx_logs_by_attempt;
