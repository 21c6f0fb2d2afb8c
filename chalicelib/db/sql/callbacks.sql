-- Completion callbacks: what a callback job reports, read in the transaction that ended
-- the execution (the worker's finalize, a cancel), so the callback exists if and only if
-- the final status does.

-- name: callbacks_sources
-- The ended executions that have a callback to create or a batch to check, with what the
-- callback's input reports: the final status, attempts, output, the last attempt's error
-- (written by the same transaction's finalize statement, so visible here), the batch, and
-- the job's depth in a chain of callbacks. The callback endpoint is the execution's copy of
-- its job's on_success / on_failure (CANCELLED fires neither). Runs only for executions the
-- finalize reported as having one, so a job without callbacks costs nothing here.
SELECT e.execution_id, e.job_id, e.endpoint, e.status, e.attempt_count, e.output,
       e.batch_id, j.callback_depth,
       CASE WHEN e.status = 'SUCCESS' THEN e.on_success
            WHEN e.status = 'FAILED' THEN e.on_failure END AS target,
       (SELECT a.error FROM attempts AS a WHERE a.execution_id = e.execution_id
        ORDER BY a.attempt_number DESC LIMIT 1) AS error
FROM executions AS e
JOIN jobs AS j ON j.job_id = e.job_id
WHERE e.execution_id = ANY(CAST(:execution_ids AS TEXT[]))

-- name: callbacks_log
-- Lines in the parent executions' logs naming their callback jobs (or why there is none),
-- so an execution's history says what followed it; one statement for a finalize's batch.
INSERT INTO execution_logs (execution_id, attempt_number, level, message)
SELECT e.execution_id, e.attempt_count, r ->> 'level', r ->> 'message'
FROM jsonb_array_elements(CAST(:lines AS JSONB)) AS r
JOIN executions AS e ON e.execution_id = r ->> 'execution_id'
