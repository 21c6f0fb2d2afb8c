-- 023_job_headers: what a job adds to each of its deliveries.
--
-- headers: the job's own headers (POST /jobs "headers"), literal strings sent with every
-- delivery (HTTP request headers over the endpoint's of the same name, Kafka record
-- headers, Redis Stream fields "header:<name>"). traceparent, tracestate: the W3C trace
-- context the job was created in (the request's headers, or the job's "headers"), kept
-- canonical; each attempt sends the same trace-id with a parent-id of its own. All three
-- are NULL for a job that has none, as every row written before this migration: the claim
-- reads them in the probe of jobs it already makes (worker_claim_rows), so a job without
-- them costs the worker nothing more.
ALTER TABLE jobs ADD COLUMN headers JSONB;
ALTER TABLE jobs ADD COLUMN traceparent TEXT;
ALTER TABLE jobs ADD COLUMN tracestate TEXT;
