-- 019_delivery_rollups: the dashboard and GET /metrics read a row per endpoint, not a row
-- per endpoint, writer and minute.
--
-- Migration 017's summary rows kept every finalizer thread's minute rows for two hours and
-- hour rows for two days, and each read summed its window: at a million attempts an hour
-- over 200 endpoints from four writers, the dashboard's last hour read about 100,000 rows
-- and an endpoint's day of health 200,000, on every poll. Now the housekeeper rolls each
-- writer's minute rows up a few minutes after their minute ends, in bounded batches, into
-- rows that only it writes (writer 'fold'):
--
--   'total'   one row per (endpoint, outcome, error type), everything ever rolled up:
--             the monotonic counters, as before;
--   'series'  one row per (minute, outcome) for all endpoints together (endpoint and
--             error type ''): the dashboard's last hour, kept two hours;
--
-- and once an hour it copies each endpoint's totals by outcome into delivery_marks: a
-- window of a day is the totals now minus the mark of a day ago (kept two days, in a
-- table of their own so the summary table stays the few rows every read needs).
--
-- A reader adds the minute rows not yet rolled up (the last few minutes), so every figure
-- is current; a row is either rolled up or not, in the transaction that moves it. The
-- 'hour' grain goes: its rows are added to the totals here.
INSERT INTO delivery_counts AS c (grain, bucket_start, endpoint, outcome, error_type, writer,
                                  attempts, ended, duration_ms, le_10, le_50, le_100,
                                  le_250, le_500, le_1000, le_5000, le_30000)
SELECT 'total', CAST('1970-01-01T00:00:00Z' AS TIMESTAMPTZ), endpoint, outcome, error_type,
       'fold', sum(attempts), sum(ended), sum(duration_ms), sum(le_10), sum(le_50),
       sum(le_100), sum(le_250), sum(le_500), sum(le_1000), sum(le_5000), sum(le_30000)
FROM delivery_counts
WHERE grain = 'hour'
GROUP BY endpoint, outcome, error_type
ON CONFLICT (grain, bucket_start, endpoint, outcome, error_type, writer) DO UPDATE
SET attempts = c.attempts + excluded.attempts,
    ended = c.ended + excluded.ended,
    duration_ms = c.duration_ms + excluded.duration_ms,
    le_10 = c.le_10 + excluded.le_10,
    le_50 = c.le_50 + excluded.le_50,
    le_100 = c.le_100 + excluded.le_100,
    le_250 = c.le_250 + excluded.le_250,
    le_500 = c.le_500 + excluded.le_500,
    le_1000 = c.le_1000 + excluded.le_1000,
    le_5000 = c.le_5000 + excluded.le_5000,
    le_30000 = c.le_30000 + excluded.le_30000;

DELETE FROM delivery_counts WHERE grain = 'hour';

ALTER TABLE delivery_counts DROP CONSTRAINT chk_delivery_counts_grain;
ALTER TABLE delivery_counts ADD CONSTRAINT chk_delivery_counts_grain
    CHECK (grain IN ('minute', 'total', 'series'));

CREATE TABLE delivery_marks (
    hour       TIMESTAMPTZ   NOT NULL,
    endpoint   TEXT          NOT NULL,
    outcome    TEXT          NOT NULL,
    attempts   BIGINT        NOT NULL,
    ended      BIGINT        NOT NULL,
    CONSTRAINT pk_delivery_marks PRIMARY KEY (hour, endpoint, outcome)
);
