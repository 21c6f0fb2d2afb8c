-- 010_instant_range: the instants a client can set stay inside the range the service carries.
--
-- The API accepts instants in [1970-01-01T00:00:00Z, 9999-01-01T00:00:00Z) only
-- (chalicelib/domain/timefmt.py says why: Python's datetime ends at 9999-12-31 in local
-- time, pg8000 reads a later year back as text, and the service renders and adds delays to
-- these values). Before this migration `ends_at: 9999-12-31T23:59:59-14:00` was stored as
-- 10000-01-01 in UTC and every read of that job, and every materializer pass, failed on it.
-- These CHECKs make the schema refuse such a value whoever writes it.
--
-- Rows written before the API checked the range are repaired first, so the constraints can
-- be added: an end beyond the range means "never ends" (NULL); any other instant beyond it
-- moves to the last second inside the range, one before it to the first. The repairs are
-- one pass over each table, once, like the constraint validation itself.

UPDATE jobs SET cron_ends_at = NULL
WHERE cron_ends_at >= TIMESTAMPTZ '9999-01-01 00:00:00+00';

UPDATE jobs SET run_at = TIMESTAMPTZ '9998-12-31 23:59:59+00'
WHERE run_at >= TIMESTAMPTZ '9999-01-01 00:00:00+00';

UPDATE jobs SET cron_next_run_at = TIMESTAMPTZ '9998-12-31 23:59:59+00'
WHERE cron_next_run_at >= TIMESTAMPTZ '9999-01-01 00:00:00+00';

UPDATE jobs SET cron_starts_at = TIMESTAMPTZ '9998-12-31 23:59:59+00'
WHERE cron_starts_at >= TIMESTAMPTZ '9999-01-01 00:00:00+00';

UPDATE jobs SET run_at = TIMESTAMPTZ '1970-01-01 00:00:00+00'
WHERE run_at < TIMESTAMPTZ '1970-01-01 00:00:00+00';

UPDATE jobs SET cron_starts_at = TIMESTAMPTZ '1970-01-01 00:00:00+00'
WHERE cron_starts_at < TIMESTAMPTZ '1970-01-01 00:00:00+00';

UPDATE executions SET run_at = TIMESTAMPTZ '9998-12-31 23:59:59+00'
WHERE run_at >= TIMESTAMPTZ '9999-01-01 00:00:00+00';

UPDATE executions SET run_at = TIMESTAMPTZ '1970-01-01 00:00:00+00'
WHERE run_at < TIMESTAMPTZ '1970-01-01 00:00:00+00';

ALTER TABLE jobs ADD CONSTRAINT chk_jobs_run_at_range CHECK (
    run_at >= TIMESTAMPTZ '1970-01-01 00:00:00+00'
    AND run_at < TIMESTAMPTZ '9999-01-01 00:00:00+00'
);

ALTER TABLE jobs ADD CONSTRAINT chk_jobs_cron_starts_at_range CHECK (
    cron_starts_at >= TIMESTAMPTZ '1970-01-01 00:00:00+00'
    AND cron_starts_at < TIMESTAMPTZ '9999-01-01 00:00:00+00'
);

ALTER TABLE jobs ADD CONSTRAINT chk_jobs_cron_ends_at_range CHECK (
    cron_ends_at >= TIMESTAMPTZ '1970-01-01 00:00:00+00'
    AND cron_ends_at < TIMESTAMPTZ '9999-01-01 00:00:00+00'
);

ALTER TABLE jobs ADD CONSTRAINT chk_jobs_cron_next_run_at_range CHECK (
    cron_next_run_at >= TIMESTAMPTZ '1970-01-01 00:00:00+00'
    AND cron_next_run_at < TIMESTAMPTZ '9999-01-01 00:00:00+00'
);

ALTER TABLE executions ADD CONSTRAINT chk_executions_run_at_range CHECK (
    run_at >= TIMESTAMPTZ '1970-01-01 00:00:00+00'
    AND run_at < TIMESTAMPTZ '9999-01-01 00:00:00+00'
);
