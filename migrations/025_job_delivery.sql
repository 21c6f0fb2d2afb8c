-- 025_job_delivery: a job's own delivery settings, and which definition of its endpoint a
-- retried execution is delivered with.
--
-- jobs.delivery_overrides: what POST /jobs set for this job alone, over its endpoint
-- (retry_policy fields, timeout_ms, url, expire_after_ms); NULL for most jobs. The claim
-- reads it with the endpoint snapshot, on the same probe of the jobs row.
--
-- executions.endpoint_version: 'current' when a retry or redrive asked for the endpoint as
-- it is now; NULL (shown as 'snapshot') is the job's own copy, as every first run.
--
-- executions.first_started_at: when the execution's first attempt was claimed, kept from the
-- first time it is scheduled to retry (NULL until then, so a delivery that succeeds at once
-- writes nothing more); max_retry_duration_ms is measured from it.
ALTER TABLE jobs ADD COLUMN delivery_overrides JSONB;
ALTER TABLE executions ADD COLUMN endpoint_version TEXT;
ALTER TABLE executions ADD COLUMN first_started_at TIMESTAMPTZ;
ALTER TABLE executions ADD CONSTRAINT chk_executions_endpoint_version CHECK (
    endpoint_version IN ('snapshot', 'current')
);
