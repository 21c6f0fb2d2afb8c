-- What GET /metrics reads (chalicelib/services/metrics.py). Every statement reads either
-- the live work (partial indexes that hold only non-terminal rows, so the cost follows
-- the backlog, never history), one probe per endpoint, or the summary rows of
-- delivery_counts (migration 017), so a scrape costs the same with a year of history as
-- with a day.
--
-- A read that returns a row per endpoint (or per endpoint and status or outcome) sends them
-- as one JSON array (json_agg of json_build_array, in a stated order): pg8000 decodes every
-- value of every row in Python, about a microsecond each, and a JSON document in C; with a
-- few hundred endpoints that was a third of a scrape's time.
--
-- GET /metrics sends them all as one statement (metrics_snapshot): each figure is a part
-- below (a CTE that statement reads once, in a scalar subquery; PostgreSQL folds a CTE
-- read once into its reader), planned on its own as a statement of its own would be. One statement is one snapshot of the database without a transaction
-- block, and one round trip instead of ten (BEGIN, eight reads, COMMIT: about 1.5 of a
-- scrape's 6 ms at 200 endpoints). The parts' parameters are named apart (:now,
-- :buckets_since and :until, :window_since, :fresh_since) because they share one
-- statement.
--
-- The summary-row reads below (and overview.sql's) take a closed window [since, until]:
-- with both ends given, a prepared statement's generic plan estimates a narrow range and
-- reads it on the primary key, where a lone lower bound is estimated at a third of the
-- table and read sequentially (two days of hour rows with the window's minutes).

-- name: metrics_health_ping
-- GET /health: the database answers a trivial statement on a pooled connection.
SELECT 1 AS ok

-- name: health_state
-- GET /health's one read: the loops of the processes alive lately (below) and the
-- processes by kind (metrics_live_processes); GET /metrics reads both in metrics_snapshot.
-- The heartbeats' two columns, the same in both statements (they change together): beats,
-- [component, metadata] of each process alive lately; kinds, each kind's live processes.
WITH
-- include: metrics_loop_states_rows
, -- include: metrics_live_processes
SELECT
    (
        SELECT COALESCE(
                   json_agg(json_build_array(h.component, h.metadata)), CAST('[]' AS JSON)
               )
        FROM metrics_loop_states_rows AS h
    ) AS beats,
    (SELECT kinds FROM metrics_live_processes) AS kinds

-- part: metrics_loop_states_rows
-- The heartbeats of the processes alive lately (rows beaten since :fresh_since, a few beats ago;
-- DEAD rows are graceful stops): each carries its loops' states in metadata.loop_states
-- (chalicelib/health/heartbeat.py). GET /health answers 503 LOOP_DOWN when one reports a
-- loop down, and GET /metrics shows te_loop_up per process and loop. A range of
-- idx_region_heartbeats_beat (migration 011), newest first: one row per live process,
-- whatever a day of dead processes leaves before the housekeeper prunes them. The LIMIT
-- keeps a load balancer's probe bounded whatever the fleet.
metrics_loop_states_rows AS (
    SELECT component, metadata
    FROM region_heartbeats
    WHERE last_beat_at >= CAST(:fresh_since AS TIMESTAMPTZ)
      AND status <> 'DEAD'
    ORDER BY last_beat_at DESC
    LIMIT 500
)

-- part: metrics_live_processes
-- Per kind of process (api, worker, scheduler), [kind, live, has run]: how many of its
-- heartbeat rows are still fresh (fresh_until, written with every beat: the beat interval,
-- or for a scheduled invocation the minute until the next one, plus a grace; DEAD rows are
-- graceful stops), and whether any row of it exists at all (kept by the housekeeper: the
-- newest row of each kind is never pruned). A range and a first entry of
-- idx_region_heartbeats_kind per kind, the count capped so a fleet cannot make it long.
metrics_live_processes AS (
    SELECT json_agg(
               json_build_array(
                   k.kind,
                   (
                       SELECT count(*)
                       FROM (
                           SELECT 1
                           FROM region_heartbeats AS h
                           WHERE h.kind = k.kind
                             AND h.fresh_until >= CAST(:now AS TIMESTAMPTZ)
                             AND h.status <> 'DEAD'
                           LIMIT 10000
                       ) AS live
                   ),
                   EXISTS (SELECT 1 FROM region_heartbeats AS r WHERE r.kind = k.kind)
               )
               ORDER BY k.kind
           ) AS kinds
    FROM (VALUES ('api'), ('scheduler'), ('worker')) AS k (kind)
)

-- part: metrics_endpoint_lag
-- Per endpoint that is not paused, the run_at of its oldest due claimable execution (NULL:
-- nothing due): two probes of idx_executions_due_by_endpoint per endpoint, its rows not
-- parked and its parked ones (a held or flow-controlled endpoint's backlog is parked by
-- the promoter, migration 018, and is lag: its work is due and waiting; the second probe
-- only for an endpoint flagged as having parked rows), each with a
-- constant LIMIT in a LATERAL (which CockroachDB accepts), so the read follows the number
-- of endpoints, never the backlog or the history. Each probe is an equality on that
-- index's leading columns (parked, endpoint), a bound on run_at and its order, so it reads
-- the head of the endpoint's range and stops; the plan test in
-- tests/integration/test_metrics.py holds it to that under both plans, with a waiting and
-- a parked backlog behind it. (Written as endpoint = name ordered by run_at alone, the
-- planner may walk idx_executions_due in run_at order instead, filtering every other
-- endpoint's due rows one by one; a row comparison led by endpoint is one
-- idx_executions_by_endpoint can take a bound from, and an equality is evaluated faster
-- than a row comparison: 1.3 against 1.8 ms for 200 probes.) A paused endpoint's backlog is
-- the operator's choice, not lag.
-- parked: endpoint en's oldest due parked row (none unless en.parked_rows), probed
-- as metrics_oldest_due_run_at probes it (the two change together).
metrics_endpoint_lag AS (
    SELECT en.name AS endpoint,
           CASE WHEN waiting.run_at IS NULL THEN parked.run_at
                WHEN parked.run_at IS NULL THEN waiting.run_at
                ELSE LEAST(waiting.run_at, parked.run_at) END AS oldest_run_at
    FROM endpoints AS en
    LEFT JOIN LATERAL (
        SELECT x.run_at
        FROM executions AS x
        WHERE x.status IN ('QUEUED', 'RETRYING') AND NOT x.ordering_wait
          AND NOT x.parked AND x.endpoint = en.name AND x.run_at <= CAST(:now AS TIMESTAMPTZ)
        ORDER BY x.parked ASC, x.endpoint ASC, x.run_at ASC
        LIMIT 1
    ) AS waiting ON TRUE
    LEFT JOIN LATERAL (
        SELECT x.run_at
        FROM executions AS x
        WHERE en.parked_rows
          AND x.status IN ('QUEUED', 'RETRYING') AND NOT x.ordering_wait
          AND x.parked AND x.endpoint = en.name AND x.run_at <= CAST(:now AS TIMESTAMPTZ)
        ORDER BY x.parked ASC, x.endpoint ASC, x.run_at ASC
        LIMIT 1
    ) AS parked ON TRUE
    WHERE en.paused_at IS NULL
      AND en.deleted_at IS NULL
    ORDER BY en.name ASC
)

-- part: metrics_ended_since
-- Executions that ended in [:buckets_since, :until] (the last minute or two), by status: SUCCESS
-- and FAILED from the writers' minute rows (delivery_counts; the housekeeper rolls a
-- minute up only minutes after it ends, migration 019), CANCELLED from one range of
-- idx_executions_cancelled (cancellations end through the API, not the finalize).
metrics_ended_since AS (
    SELECT outcome AS status, COALESCE(sum(ended), 0) AS n
    FROM delivery_counts
    WHERE grain = 'minute' AND bucket_start >= CAST(:buckets_since AS TIMESTAMPTZ)
      AND bucket_start <= CAST(:until AS TIMESTAMPTZ)
    GROUP BY outcome
    UNION ALL
    SELECT 'CANCELLED' AS status, count(*) AS n
    FROM executions
    WHERE status = 'CANCELLED' AND completed_at >= CAST(:buckets_since AS TIMESTAMPTZ)
      AND completed_at <= CAST(:until AS TIMESTAMPTZ)
)

-- part: metrics_attempts_since
-- Delivery attempts finished in the minutes of [:buckets_since, :until] (the writers' minute rows,
-- not yet rolled up): how many, their total duration and the histogram buckets the
-- quantiles are estimated from.
metrics_attempts_since AS (
    SELECT COALESCE(sum(attempts), 0) AS n, COALESCE(sum(duration_ms), 0) AS total_ms,
           COALESCE(sum(le_10), 0) AS le_10, COALESCE(sum(le_50), 0) AS le_50,
           COALESCE(sum(le_100), 0) AS le_100, COALESCE(sum(le_250), 0) AS le_250,
           COALESCE(sum(le_500), 0) AS le_500, COALESCE(sum(le_1000), 0) AS le_1000,
           COALESCE(sum(le_5000), 0) AS le_5000, COALESCE(sum(le_30000), 0) AS le_30000
    FROM delivery_counts
    WHERE grain = 'minute' AND bucket_start >= CAST(:buckets_since AS TIMESTAMPTZ)
      AND bucket_start <= CAST(:until AS TIMESTAMPTZ)
)

-- part: metrics_delivery_totals
-- Every delivery attempt ever recorded (since migration 017) and the executions those
-- attempts ended: the monotonic counters. The housekeeper's 'total' rows plus the writers'
-- minute rows not rolled up yet (a roll-up moves a row from one to the other in one
-- transaction, so nothing is counted twice or lost): a row per key and a few minutes of
-- rows, whatever the history. Summed once by (endpoint, outcome, error type), then given
-- as the counters' own rows, in their order: [[endpoint, outcome, attempts, ended], ...]
-- by outcome, and [[endpoint, error_type, attempts], ...] of the failed ones, so the
-- exposition renders them as they come.
metrics_delivery_totals AS (
    WITH keyed AS (
        SELECT endpoint, outcome, error_type, sum(attempts) AS attempts, sum(ended) AS ended
        FROM delivery_counts
        WHERE grain IN ('total', 'minute')
        GROUP BY endpoint, outcome, error_type
    )
    SELECT json_build_array(
               (
                   SELECT COALESCE(
                              json_agg(
                                  json_build_array(o.endpoint, o.outcome, o.attempts, o.ended)
                                  ORDER BY o.endpoint, o.outcome
                              ),
                              CAST('[]' AS JSON)
                          )
                   FROM (
                       SELECT k.endpoint, k.outcome, sum(k.attempts) AS attempts,
                              sum(k.ended) AS ended
                       FROM keyed AS k
                       GROUP BY k.endpoint, k.outcome
                   ) AS o
               ),
               (
                   SELECT COALESCE(
                              json_agg(
                                  json_build_array(f.endpoint, f.error_type, f.attempts)
                                  ORDER BY f.endpoint, f.error_type
                              ),
                              CAST('[]' AS JSON)
                          )
                   FROM keyed AS f
                   WHERE f.outcome = 'FAILED'
               )
           ) AS totals
)

-- part: metrics_auto_paused
-- te_endpoint_auto_paused_total: per live endpoint and automatic reason (FAILING, GONE), the
-- pauses counted in endpoint_auto_pauses by the transactions that paused (migration 028),
-- 0 where there was none, so the series exists before its first pause and increase() sees
-- the first one. A read of the endpoints table and a probe of the counters' primary key
-- per endpoint and reason: it follows the number of endpoints, as metrics_endpoint_lag.
-- [[endpoint, reason, total], ...] in that order.
metrics_auto_paused AS (
    SELECT COALESCE(
               json_agg(
                   json_build_array(en.name, r.reason, COALESCE(p.total, 0))
                   ORDER BY en.name, r.reason
               ),
               CAST('[]' AS JSON)
           ) AS auto_paused
    FROM endpoints AS en
    CROSS JOIN (VALUES ('FAILING'), ('GONE')) AS r (reason)
    LEFT JOIN endpoint_auto_pauses AS p ON p.endpoint = en.name AND p.reason = r.reason
    WHERE en.deleted_at IS NULL
)

-- part: metrics_events_since
-- Cron ticks materialized and executions reclaimed since :window_since, summed over every
-- scheduler's rows: one range of the primary key per event.
metrics_events_since AS (
    SELECT event, coalesce(sum(amount), 0) AS n
    FROM metric_events
    WHERE event IN ('cron_ticks_materialized', 'reclaimed')
      AND recorded_at >= CAST(:window_since AS TIMESTAMPTZ)
    GROUP BY event
    ORDER BY event
)

-- part: metrics_ordering_blocked
-- te_ordering_keys_blocked{endpoint}: the blocked ordering keys of each endpoint that has
-- some or blocks on a failed head (0 then), by endpoint. The blocked keys are read on
-- idx_ordering_keys_blocked (only they are in it, never every key), the endpoints that
-- block from the endpoints table (its size is the number registered).
metrics_ordering_blocked AS (
    SELECT COALESCE(json_agg(json_build_array(b.endpoint, b.n) ORDER BY b.endpoint),
                    CAST('[]' AS JSON)) AS ordering_blocked
    FROM (
        SELECT u.endpoint, sum(u.n) AS n
        FROM (
            SELECT o.endpoint, count(*) AS n
            FROM ordering_keys AS o
            WHERE o.blocked_execution_id IS NOT NULL
            GROUP BY o.endpoint
            UNION ALL
            SELECT en.name, 0
            FROM endpoints AS en
            WHERE en.ordering ->> 'on_failure' = 'block' AND en.deleted_at IS NULL
        ) AS u
        GROUP BY u.endpoint
    ) AS b
)

-- name: health_live_processes
-- The processes by kind alone (the housekeeper's queue_health line).
WITH
-- include: metrics_live_processes
SELECT (SELECT kinds FROM metrics_live_processes) AS kinds

-- name: metrics_oldest_due
-- GET /overview's lag and the queue_health line's; GET /metrics reads it in
-- metrics_snapshot.
WITH
-- include: metrics_oldest_due_run_at
SELECT oldest_run_at FROM metrics_oldest_due_run_at

-- name: metrics_snapshot
-- Every figure of GET /metrics in one statement (chalicelib/services/metrics.py), each a
-- scalar subquery over a part (a CTE) above: the waiting and running counts, the oldest due run_at
-- and each endpoint's lag (seconds past :now, 0 when nothing is due: computed here so no
-- timestamp crosses the wire per endpoint), what ended and the attempts' durations in the
-- buckets of [:buckets_since, :until], the counters (the automatic pauses' too), the
-- events since :window_since and
-- the heartbeats since :fresh_since. Row sets are JSON arrays in a stated order.
WITH
-- include: metrics_queue_depth
, -- include: metrics_oldest_due_run_at
, -- include: metrics_endpoint_lag
, -- include: metrics_ended_since
, -- include: metrics_attempts_since
, -- include: metrics_delivery_totals
, -- include: metrics_auto_paused
, -- include: metrics_events_since
, -- include: metrics_ordering_blocked
, -- include: metrics_loop_states_rows
, -- include: metrics_live_processes
SELECT
    (SELECT depth FROM metrics_queue_depth) AS depth,
    (
        SELECT COALESCE(
                   EXTRACT(EPOCH FROM CAST(:now AS TIMESTAMPTZ) - o.oldest_run_at), 0
               )
        FROM metrics_oldest_due_run_at AS o
    ) AS oldest_lag,
    (
        SELECT COALESCE(
                   json_agg(
                       json_build_array(
                           l.endpoint,
                           COALESCE(
                               EXTRACT(EPOCH FROM CAST(:now AS TIMESTAMPTZ) - l.oldest_run_at),
                               0
                           )
                       )
                       ORDER BY l.endpoint
                   ),
                   CAST('[]' AS JSON)
               )
        FROM metrics_endpoint_lag AS l
    ) AS lag,
    (
        SELECT COALESCE(json_agg(json_build_array(e.status, e.n)), CAST('[]' AS JSON))
        FROM metrics_ended_since AS e
    ) AS ended,
    (
        SELECT json_build_array(a.n, a.total_ms, a.le_10, a.le_50, a.le_100, a.le_250,
                                a.le_500, a.le_1000, a.le_5000, a.le_30000)
        FROM metrics_attempts_since AS a
    ) AS durations,
    (SELECT totals FROM metrics_delivery_totals) AS totals,
    (SELECT auto_paused FROM metrics_auto_paused) AS auto_paused,
    (
        SELECT COALESCE(json_agg(json_build_array(v.event, v.n)), CAST('[]' AS JSON))
        FROM metrics_events_since AS v
    ) AS events,
    (SELECT ordering_blocked FROM metrics_ordering_blocked) AS ordering_blocked,
    (
        SELECT COALESCE(
                   json_agg(json_build_array(h.component, h.metadata)), CAST('[]' AS JSON)
               )
        FROM metrics_loop_states_rows AS h
    ) AS beats,
    (SELECT kinds FROM metrics_live_processes) AS kinds

-- name: metrics_record_event
-- Written by the materializer and the reclaimer inside the transaction that did the work
-- (one row per iteration that did something), so the row commits exactly with the work.
INSERT INTO metric_events (event, recorded_at, amount)
VALUES (:event, CAST(:now AS TIMESTAMPTZ), :amount)
