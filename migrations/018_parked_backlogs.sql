-- 018_parked_backlogs: what nobody may claim leaves the index the claim walks, and the
-- live counts are kept, not counted per read.
--
-- parked: a due (QUEUED or RETRYING) execution of an endpoint that is paused, flow-
-- controlled, or held by a Retry-After for longer than a moment. The worker's claim walks
-- idx_executions_due in run_at order and passed over such rows one by one on every poll,
-- so a paused endpoint's backlog of 10^5 made each idle poll read 10^5 index entries. The
-- delayed promoter (chalicelib/scheduler/promoter.py) parks them and unparks them once the
-- endpoint is released, a bounded page per pass, oldest first; until then the claim still
-- passes over a controlled endpoint's unparked rows (its :full list and the fair-share
-- join), so parking only decides what the claim has to read, never what it may take. New
-- and retried rows are born unparked; every other statement keeps its meaning.
ALTER TABLE executions ADD COLUMN parked BOOLEAN NOT NULL DEFAULT false;

-- parked_rows: the promoter has parked some of this endpoint's rows and has not yet seen
-- them all unparked, so unparking reads only the endpoints that have parked rows (a few),
-- never every endpoint on every pass. Set by the statement that parks, cleared by the one
-- that finds the endpoint released and none of its due rows parked.
ALTER TABLE endpoints ADD COLUMN parked_rows BOOLEAN NOT NULL DEFAULT false;

CREATE INDEX idx_endpoints_parked_rows ON endpoints (name) WHERE parked_rows;

-- The claim's walk, now without parked rows (same keys as migration 004's).
DROP INDEX IF EXISTS idx_executions_due;
CREATE INDEX idx_executions_due
    ON executions (run_at ASC, execution_id ASC)
    WHERE status IN ('QUEUED', 'RETRYING') AND NOT parked;

-- An endpoint's due rows, parked or not (parked a key, so the promoter finds an endpoint's
-- rows to park or to unpark as one range each, and the metered claim and the lag probe
-- read both ranges oldest first).
DROP INDEX IF EXISTS idx_executions_due_by_endpoint;
CREATE INDEX idx_executions_due_by_endpoint
    ON executions (endpoint, parked, run_at ASC)
    WHERE status IN ('QUEUED', 'RETRYING');

-- live_counts: the executions not yet ended, by endpoint and status, as the promoter last
-- counted them (every LIVE_COUNTS_EVERY, chalicelib/scheduler/promoter.py). GET /overview
-- and GET /metrics read these rows (one per endpoint and status) and the RUNNING rows,
-- which the workers' slots bound, instead of counting every live execution on every
-- dashboard poll and every scrape. One writer at a time replaces the whole set in one
-- transaction; counted_at says how old the figures are.
CREATE TABLE live_counts (
    endpoint    TEXT          NOT NULL,
    status      TEXT          NOT NULL,
    n           BIGINT        NOT NULL,
    counted_at  TIMESTAMPTZ   NOT NULL,
    CONSTRAINT pk_live_counts PRIMARY KEY (endpoint, status),
    CONSTRAINT chk_live_counts_status CHECK (status IN ('PENDING', 'QUEUED', 'RETRYING'))
);
