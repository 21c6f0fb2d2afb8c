-- Keyed executions (chalicelib/services/keys.py): ordering keys (migration 031: executions
-- of one endpoint that share a key start one at a time, in their order) and concurrency
-- keys (migration 032: at most flow_control.max_concurrency_per_key of one key run at
-- once). An execution waiting for its key's turn (ordering_wait TRUE: behind an ordering
-- key's head, or for room in its concurrency key) is outside the indexes the claim walks;
-- whatever creates, ends or re-queues a keyed execution settles its key in the same
-- transaction, with two statements per kind sent only when a keyed row is involved: a
-- lock (ordering_lock_keys, concurrency_lock_keys or keys_lock_changed: it writes each
-- key's row, the lock that orders a creation and a release on one key), then the kind's
-- settle (ordering_settle, concurrency_settle). The lock is written, not only taken (ON
-- CONFLICT DO UPDATE makes a new row version): a SERIALIZABLE creation whose snapshot
-- predates a release committed on the key gets a 40001 at its own lock, and the
-- transaction helper retries it with a snapshot that sees the release. A settle runs as a
-- statement of its own after the lock is granted, so at READ COMMITTED (the worker's
-- finalize) its snapshot sees every creation committed on the key before.

-- name: ordering_lock_keys
-- The lock of keys that just got executions (:keys, a JSONB array of {"endpoint", "key"}):
-- each key's row is inserted, or rewritten, in (endpoint, key) order, so two transactions
-- lock shared keys in the same order.
INSERT INTO ordering_keys AS o (endpoint, ordering_key)
SELECT DISTINCT r ->> 'endpoint', r ->> 'key'
FROM jsonb_array_elements(CAST(:keys AS JSONB)) AS r
ORDER BY 1, 2
ON CONFLICT (endpoint, ordering_key) DO UPDATE SET touched_at = now()
RETURNING o.endpoint, o.ordering_key AS key

-- name: keys_lock_changed
-- The lock of the keys, of both kinds, of executions that just ended or were re-queued
-- (:ids; rows without a key are passed over: a primary key probe each), rows of kind
-- 'ordering' then 'concurrency'. A head that ended FAILED on an endpoint whose
-- ordering.on_failure is "block" blocks its ordering key (blocked_execution_id, since now);
-- a blocked key stays blocked by its first failed head. :revived, the ids among them that
-- were re-queued: a key blocked by one of them is unblocked (a retry of the failed head).
-- A gated execution's concurrency key row is written as concurrency_lock_keys writes it
-- (the two tables are different, which CockroachDB allows in one statement).
WITH changed AS (
    SELECT e.endpoint, e.ordering_key,
           max(CASE WHEN e.status = 'FAILED' AND NOT e.ordering_wait
                     AND en.ordering ->> 'on_failure' = 'block'
                    THEN e.execution_id END) AS blocker
    FROM executions AS e
    LEFT JOIN endpoints AS en ON en.name = e.endpoint
    WHERE e.execution_id = ANY(CAST(:ids AS TEXT[]))
      AND e.ordering_key IS NOT NULL
    GROUP BY e.endpoint, e.ordering_key
), ordered AS (
    INSERT INTO ordering_keys AS o (endpoint, ordering_key, blocked_execution_id,
                                    blocked_since)
    SELECT endpoint, ordering_key, blocker, CASE WHEN blocker IS NOT NULL THEN now() END
    FROM changed
    ORDER BY endpoint, ordering_key
    ON CONFLICT (endpoint, ordering_key) DO UPDATE
    SET touched_at = now(),
        blocked_execution_id = CASE
            WHEN o.blocked_execution_id = ANY(CAST(:revived AS TEXT[])) THEN NULL
            ELSE COALESCE(o.blocked_execution_id, excluded.blocked_execution_id) END,
        blocked_since = CASE
            WHEN o.blocked_execution_id = ANY(CAST(:revived AS TEXT[])) THEN NULL
            ELSE COALESCE(o.blocked_since, excluded.blocked_since) END
    RETURNING o.endpoint, o.ordering_key AS key
), gated AS (
    INSERT INTO concurrency_keys AS c (endpoint, concurrency_key)
    SELECT DISTINCT e.endpoint, e.concurrency_key
    FROM executions AS e
    WHERE e.execution_id = ANY(CAST(:ids AS TEXT[]))
      AND e.concurrency_key IS NOT NULL
    ORDER BY 1, 2
    ON CONFLICT (endpoint, concurrency_key) DO UPDATE SET touched_at = now()
    RETURNING c.endpoint, c.concurrency_key AS key
)
SELECT 'ordering' AS kind, endpoint, key FROM ordered
UNION ALL
SELECT 'concurrency' AS kind, endpoint, key FROM gated

-- name: ordering_settle
-- Each key's head, decided again (:keys, a JSONB array of {"endpoint", "key"}, locked by
-- this transaction). Two probes of idx_executions_ordering per key: the key's head (its one
-- live execution not waiting) and the first one waiting behind it, by place (ordering_at,
-- created_at, ordering_seq). A blocked key releases nothing. With no head, the first
-- waiting one becomes the head. A head that has not started yet (PENDING or QUEUED, never
-- attempted) gives its place to a waiting execution placed before it (a DELAYED job due
-- earlier, created after it); one that has started (RUNNING, or any attempt made: a
-- RETRYING head waiting for its backoff) holds the key until it ends. One UPDATE moves the
-- released row out of the wait and the displaced one into it (toggling ordering_wait,
-- unparked either way: the promoter parks a released row again if its endpoint is
-- controlled); the displaced row is re-checked as not started on its latest version, so a
-- claim that took it first wins.
WITH k AS (
    SELECT o.endpoint, o.ordering_key, o.blocked_execution_id
    FROM jsonb_array_elements(CAST(:keys AS JSONB)) AS r
    CROSS JOIN LATERAL (  -- LIMIT 1: a primary key probe per key, never a join
        SELECT x.endpoint, x.ordering_key, x.blocked_execution_id
        FROM ordering_keys AS x
        WHERE x.endpoint = r ->> 'endpoint' AND x.ordering_key = r ->> 'key'
        LIMIT 1
    ) AS o
), probed AS (
    SELECT k.blocked_execution_id, h.execution_id AS head_id, h.started,
           h.ordering_at AS h_at, h.created_at AS h_created, h.ordering_seq AS h_seq,
           w.execution_id AS next_id,
           w.ordering_at AS w_at, w.created_at AS w_created, w.ordering_seq AS w_seq
    FROM k
    LEFT JOIN LATERAL (
        SELECT x.execution_id, (x.status = 'RUNNING' OR x.attempt_count > 0) AS started,
               x.ordering_at, x.created_at, COALESCE(x.ordering_seq, 0) AS ordering_seq
        FROM executions AS x
        WHERE x.endpoint = k.endpoint AND x.ordering_key = k.ordering_key
          AND x.ordering_wait = FALSE
          AND x.status IN ('PENDING', 'QUEUED', 'RUNNING', 'RETRYING')
        ORDER BY x.ordering_at ASC, x.created_at ASC, x.ordering_seq ASC
        LIMIT 1
    ) AS h ON TRUE
    LEFT JOIN LATERAL (
        SELECT x.execution_id, x.ordering_at, x.created_at,
               COALESCE(x.ordering_seq, 0) AS ordering_seq
        FROM executions AS x
        WHERE x.endpoint = k.endpoint AND x.ordering_key = k.ordering_key
          AND x.ordering_wait = TRUE
          AND x.status IN ('PENDING', 'QUEUED', 'RUNNING', 'RETRYING')
        ORDER BY x.ordering_at ASC, x.created_at ASC, x.ordering_seq ASC
        LIMIT 1
    ) AS w ON TRUE
), decided AS (
    SELECT next_id AS release_id,
           CASE WHEN head_id IS NOT NULL THEN head_id END AS demote_id
    FROM probed
    WHERE blocked_execution_id IS NULL
      AND next_id IS NOT NULL
      AND (head_id IS NULL
           OR (NOT started AND (w_at, w_created, w_seq) < (h_at, h_created, h_seq)))
), moving AS (
    SELECT release_id AS execution_id FROM decided
    UNION ALL
    SELECT demote_id FROM decided WHERE demote_id IS NOT NULL
)
UPDATE executions AS e
SET ordering_wait = NOT e.ordering_wait,
    parked = FALSE
WHERE e.execution_id = ANY(ARRAY(SELECT execution_id FROM moving))  -- key probes
  AND e.status IN ('PENDING', 'QUEUED', 'RUNNING', 'RETRYING')
  AND (e.ordering_wait OR (e.status IN ('PENDING', 'QUEUED') AND e.attempt_count = 0))
RETURNING e.execution_id, e.ordering_wait

-- name: ordering_blocked_page
-- GET /endpoints/{name}/ordering-keys?state=blocked: one page of the endpoint's blocked
-- keys, by key, after the cursor's key (:after, NULL for the first page), at most
-- :limit_plus_one (one more says whether a next page exists): a range of
-- idx_ordering_keys_blocked.
SELECT ordering_key AS key, blocked_execution_id AS execution_id, blocked_since AS since
FROM ordering_keys
WHERE endpoint = :endpoint
  AND blocked_execution_id IS NOT NULL
  AND (CAST(:after AS TEXT) IS NULL OR ordering_key > CAST(:after AS TEXT))
ORDER BY endpoint ASC, ordering_key ASC
LIMIT :limit_plus_one

-- name: ordering_skip
-- POST /endpoints/{name}/ordering-keys/{key}/skip: a blocked key stops waiting for its
-- failed head (which stays FAILED); the row is rewritten, as every lock of a key is, and
-- ordering_settle then releases the next execution. No row: the key is not blocked (409).
UPDATE ordering_keys
SET blocked_execution_id = NULL, blocked_since = NULL, touched_at = now()
WHERE endpoint = :endpoint AND ordering_key = :key AND blocked_execution_id IS NOT NULL
RETURNING endpoint, ordering_key AS key

-- name: concurrency_lock_keys
-- The lock of concurrency keys that just got gated executions (:keys, a JSONB array of
-- {"endpoint", "key"}): each key's row is inserted, or rewritten, in (endpoint, key)
-- order, as ordering_lock_keys does.
INSERT INTO concurrency_keys AS c (endpoint, concurrency_key)
SELECT DISTINCT r ->> 'endpoint', r ->> 'key'
FROM jsonb_array_elements(CAST(:keys AS JSONB)) AS r
ORDER BY 1, 2
ON CONFLICT (endpoint, concurrency_key) DO UPDATE SET touched_at = now()
RETURNING c.endpoint, c.concurrency_key AS key

-- name: concurrency_settle
-- Each concurrency key's room, decided again (:keys, a JSONB array of {"endpoint", "key"},
-- locked by this transaction). L is the endpoint's flow_control.max_concurrency_per_key as
-- it is now (an endpoint PUT applies at each key's next settle); held, the key's live
-- executions not waiting (a RETRYING one in its backoff holds its room), counted on
-- idx_executions_concurrency up to 10,000 (L's bound). The first (L - held) waiting ones
-- by place (ordering_at, created_at, ordering_seq) are released, at most 100 per settle
-- (a constant LIMIT, which CockroachDB accepts in a LATERAL subquery where a correlated one
-- is doubtful; with no L any more, a removed limit, 100 go at each settle: the key's next
-- ends release the rest). With no room, the displacement rule of ordering_settle: the
-- first waiting one takes the place of the last-placed released one that has not started
-- (PENDING or QUEUED, never attempted, among the key's last 100 released by place) when
-- it is placed before it, so a DELAYED job due in an hour does not hold the room of an
-- IMMEDIATE one created after it. A released row also re-enters the due queue at its
-- release: run_at becomes at least now(), so a big key's next rows queue behind the rows
-- other keys already have due (keys take turns); its due time stays in ordering_at. One
-- UPDATE moves both ways (toggling ordering_wait, unparked: the promoter parks a row again
-- while its endpoint is controlled); the displaced row is re-checked as not started on its
-- latest version, so a claim that took it first wins.
WITH k AS (
    SELECT c.endpoint, c.concurrency_key,
           CAST(en.flow_control ->> 'max_concurrency_per_key' AS BIGINT) AS lim
    FROM jsonb_array_elements(CAST(:keys AS JSONB)) AS r
    CROSS JOIN LATERAL (  -- LIMIT 1: a primary key probe per key, never a join
        SELECT x.endpoint, x.concurrency_key
        FROM concurrency_keys AS x
        WHERE x.endpoint = r ->> 'endpoint' AND x.concurrency_key = r ->> 'key'
        LIMIT 1
    ) AS c
    LEFT JOIN LATERAL (
        SELECT y.flow_control FROM endpoints AS y WHERE y.name = c.endpoint LIMIT 1
    ) AS en ON TRUE
), room AS (
    SELECT k.endpoint, k.concurrency_key,
           CASE WHEN k.lim IS NULL THEN 100 ELSE LEAST(k.lim - h.held, 100) END AS room
    FROM k
    CROSS JOIN LATERAL (
        SELECT count(*) AS held
        FROM (
            SELECT 1
            FROM executions AS x
            WHERE x.endpoint = k.endpoint AND x.concurrency_key = k.concurrency_key
              AND x.ordering_wait = FALSE
              AND x.status IN ('PENDING', 'QUEUED', 'RUNNING', 'RETRYING')
            LIMIT 10000
        ) AS held_rows
    ) AS h
), waiting AS (
    SELECT room.endpoint, room.concurrency_key, room.room, w.execution_id,
           w.ordering_at, w.created_at, w.ordering_seq,
           row_number() OVER (PARTITION BY room.endpoint, room.concurrency_key
                              ORDER BY w.ordering_at ASC, w.created_at ASC,
                                       w.ordering_seq ASC) AS rank
    FROM room
    CROSS JOIN LATERAL (
        SELECT x.execution_id, x.ordering_at, x.created_at,
               COALESCE(x.ordering_seq, 0) AS ordering_seq
        FROM executions AS x
        WHERE x.endpoint = room.endpoint AND x.concurrency_key = room.concurrency_key
          AND x.ordering_wait = TRUE
          AND x.status IN ('PENDING', 'QUEUED', 'RUNNING', 'RETRYING')
        ORDER BY x.ordering_at ASC, x.created_at ASC, x.ordering_seq ASC
        LIMIT 100
    ) AS w
), displaced AS (
    SELECT f.execution_id AS release_id, d.execution_id AS demote_id
    FROM (SELECT * FROM waiting WHERE rank = 1 AND room <= 0) AS f  -- keys without room
    CROSS JOIN LATERAL (
        SELECT r.execution_id, r.ordering_at, r.created_at, r.ordering_seq
        FROM (
            SELECT x.execution_id, x.status, x.attempt_count, x.ordering_at, x.created_at,
                   COALESCE(x.ordering_seq, 0) AS ordering_seq
            FROM executions AS x
            WHERE x.endpoint = f.endpoint AND x.concurrency_key = f.concurrency_key
              AND x.ordering_wait = FALSE
              AND x.status IN ('PENDING', 'QUEUED', 'RUNNING', 'RETRYING')
            ORDER BY x.ordering_at DESC, x.created_at DESC, x.ordering_seq DESC
            LIMIT 100
        ) AS r
        WHERE r.status IN ('PENDING', 'QUEUED') AND r.attempt_count = 0
        ORDER BY r.ordering_at DESC, r.created_at DESC, r.ordering_seq DESC
        LIMIT 1
    ) AS d
    WHERE (f.ordering_at, f.created_at, f.ordering_seq)
          < (d.ordering_at, d.created_at, d.ordering_seq)
), moving AS (
    SELECT execution_id FROM waiting WHERE rank <= room
    UNION ALL
    SELECT release_id FROM displaced
    UNION ALL
    SELECT demote_id FROM displaced
)
UPDATE executions AS e
SET ordering_wait = NOT e.ordering_wait,
    parked = FALSE,
    run_at = CASE WHEN e.ordering_wait THEN GREATEST(e.run_at, now()) ELSE e.run_at END
WHERE e.execution_id = ANY(ARRAY(SELECT execution_id FROM moving))  -- key probes
  AND e.status IN ('PENDING', 'QUEUED', 'RUNNING', 'RETRYING')
  AND (e.ordering_wait OR (e.status IN ('PENDING', 'QUEUED') AND e.attempt_count = 0))
RETURNING e.execution_id, e.ordering_wait
