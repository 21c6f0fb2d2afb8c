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
-- or not, with its attempts counted by outcome in the rolled-up totals and what the last
-- pass remembered (endpoint_failing). The totals are the housekeeper's 'total' rows of
-- delivery_counts, one probe of its primary key per endpoint (grain, bucket_start and
-- endpoint all equalities); the writers' minute rows not rolled up yet (the last few
-- minutes) are left out, because no index leads with their endpoint and reading them all
-- would cost the page every endpoint's. So the rule sees each attempt a few minutes late
-- (the housekeeper rolls a minute up three minutes after it ends, earlier in the same
-- pass), failures and successes alike, and a pass costs its page, never the history.
SELECT en.name AS endpoint, en.auto_pause_after_ms, en.paused_at IS NOT NULL AS paused,
       COALESCE(t.succeeded, 0) AS succeeded, COALESCE(t.failed, 0) AS failed,
       f.succeeded AS seen_succeeded, f.failed AS seen_failed, f.failing_since
FROM (
    SELECT e.name, e.auto_pause_after_ms, e.paused_at
    FROM endpoints AS e
    WHERE e.name > CAST(:after AS TEXT)
      AND e.deleted_at IS NULL AND e.auto_pause_after_ms IS NOT NULL
    ORDER BY e.name ASC
    LIMIT :batch
) AS en
LEFT JOIN LATERAL (
    SELECT sum(CASE WHEN d.outcome = 'SUCCESS' THEN d.attempts ELSE 0 END) AS succeeded,
           sum(CASE WHEN d.outcome = 'FAILED' THEN d.attempts ELSE 0 END) AS failed
    FROM delivery_counts AS d
    WHERE d.grain = 'total' AND d.bucket_start = CAST('1970-01-01T00:00:00Z' AS TIMESTAMPTZ)
      AND d.endpoint = en.name
) AS t ON TRUE
LEFT JOIN LATERAL (  -- LIMIT 1: one probe of the primary key per endpoint, never a join
    SELECT x.succeeded, x.failed, x.failing_since
    FROM endpoint_failing AS x WHERE x.endpoint = en.name LIMIT 1
) AS f ON TRUE
ORDER BY en.name ASC

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

-- name: auto_pause_forget
-- What the FAILING rule remembered of an endpoint of this name (:endpoint), dropped when the
-- name is registered (again): a deleted endpoint's failing stretch must not pause the new
-- one at its first failure. A primary key probe; nothing for a name never judged.
DELETE FROM endpoint_failing WHERE endpoint = :endpoint
