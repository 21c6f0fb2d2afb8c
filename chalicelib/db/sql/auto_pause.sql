-- Endpoints that pause themselves (chalicelib/services/auto_pause.py): a 410 Gone pauses
-- its endpoint in the worker's finalize, every attempt failing for longer than
-- auto_pause_after_ms pauses it from the housekeeper. Both pause through one statement.

-- name: auto_pause_endpoints
-- Pause the endpoints :names for :reason (GONE, FAILING) at :now, and count each pause in
-- endpoint_auto_pauses (te_endpoint_auto_paused_total), in the caller's transaction. Only
-- an endpoint that is live and not paused yet is paused (an OPERATOR or earlier pause keeps
-- its reason and time), so a pause is counted once: two transactions pausing one endpoint
-- at once serialize on its row, and the second finds it paused (at READ COMMITTED, the
-- finalize's, the UPDATE checks paused_at again on the row the first committed). Returns
-- the endpoints this statement paused, with their paused_at (what the operator event
-- reports and derives its idempotency key from). The counter is a second table: CockroachDB
-- refuses a statement that modifies one table twice, not two tables.
WITH paused AS (
    UPDATE endpoints
    SET paused_at = CAST(:now AS TIMESTAMPTZ), paused_reason = CAST(:reason AS TEXT)
    WHERE name = ANY(CAST(:names AS TEXT[])) AND paused_at IS NULL AND deleted_at IS NULL
    RETURNING name, paused_at
), counted AS (
    INSERT INTO endpoint_auto_pauses AS c (endpoint, reason, total, last_at)
    SELECT p.name, CAST(:reason AS TEXT), 1, p.paused_at FROM paused AS p
    ON CONFLICT (endpoint, reason) DO UPDATE
    SET total = c.total + 1, last_at = excluded.last_at
    RETURNING c.endpoint
)
SELECT p.name AS endpoint, p.paused_at, (SELECT count(*) FROM counted) AS counted
FROM paused AS p
ORDER BY p.name

-- name: auto_pause_watch_page
-- The FAILING rule's read, one page of endpoints after :after in name order (the primary
-- key; at most :batch): each live endpoint whose rule is on (auto_pause_after_ms set), paused
-- or not, with its attempts counted by outcome so far and what the last pass remembered
-- (endpoint_failing). The counts are GET /metrics' te_delivery_attempts_total: the
-- housekeeper's 'total' rows (one probe of delivery_counts' primary key per endpoint, its
-- leading columns all equalities) plus the writers' minute rows not rolled up yet (the last
-- few minutes, read once for the page). So a pass costs the page, never the history.
WITH page AS (
    SELECT en.name, en.auto_pause_after_ms, en.paused_at IS NOT NULL AS paused
    FROM endpoints AS en
    WHERE en.name > CAST(:after AS TEXT)
      AND en.deleted_at IS NULL AND en.auto_pause_after_ms IS NOT NULL
    ORDER BY en.name ASC
    LIMIT :batch
), recent AS (
    SELECT d.endpoint,
           sum(CASE WHEN d.outcome = 'SUCCESS' THEN d.attempts ELSE 0 END) AS succeeded,
           sum(CASE WHEN d.outcome = 'FAILED' THEN d.attempts ELSE 0 END) AS failed
    FROM delivery_counts AS d
    WHERE d.grain = 'minute' AND d.endpoint IN (SELECT name FROM page)
    GROUP BY d.endpoint
)
SELECT p.name AS endpoint, p.auto_pause_after_ms, p.paused,
       COALESCE(t.succeeded, 0) + COALESCE(r.succeeded, 0) AS succeeded,
       COALESCE(t.failed, 0) + COALESCE(r.failed, 0) AS failed,
       f.succeeded AS seen_succeeded, f.failed AS seen_failed, f.failing_since
FROM page AS p
LEFT JOIN LATERAL (
    SELECT sum(CASE WHEN d.outcome = 'SUCCESS' THEN d.attempts ELSE 0 END) AS succeeded,
           sum(CASE WHEN d.outcome = 'FAILED' THEN d.attempts ELSE 0 END) AS failed
    FROM delivery_counts AS d
    WHERE d.grain = 'total' AND d.bucket_start = CAST('1970-01-01T00:00:00Z' AS TIMESTAMPTZ)
      AND d.endpoint = p.name
) AS t ON TRUE
LEFT JOIN recent AS r ON r.endpoint = p.name
LEFT JOIN endpoint_failing AS f ON f.endpoint = p.name
ORDER BY p.name ASC

-- name: auto_pause_watch_save
-- What the FAILING rule remembers of the endpoints whose memory changed this pass (:rows, a
-- JSON array of [endpoint, succeeded, failed, failing_since or null]): one upsert on the
-- primary key per pass, nothing for an endpoint whose counts did not move.
INSERT INTO endpoint_failing AS f (endpoint, succeeded, failed, failing_since, checked_at)
SELECT r ->> 0, CAST(r ->> 1 AS BIGINT), CAST(r ->> 2 AS BIGINT),
       CAST(r ->> 3 AS TIMESTAMPTZ), CAST(:now AS TIMESTAMPTZ)
FROM jsonb_array_elements(CAST(:rows AS JSONB)) AS r
ON CONFLICT (endpoint) DO UPDATE
SET succeeded = excluded.succeeded, failed = excluded.failed,
    failing_since = excluded.failing_since, checked_at = excluded.checked_at
