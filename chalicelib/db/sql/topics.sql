-- Fan-out topics (migrations/030_topics.sql): a name and the endpoints it fans out to.
--
-- The catalogue_topic_* statements have the catalogue's shapes and parameter names (:name,
-- :value: the endpoints as a JSON array sent as text), so the shared list, get and delete
-- of chalicelib/services/catalogue.py serve topics too. topics.endpoints is what the API
-- shows; topic_endpoints holds the same names one row each, for the reverse lookup an
-- endpoint's delete makes. Both are written in the topic's one transaction.

-- name: catalogue_topic_insert
-- ON CONFLICT on the name: a taken name returns no row (409) instead of aborting the
-- transaction on a unique violation.
INSERT INTO topics (name, endpoints) VALUES (:name, CAST(:value AS JSONB))
ON CONFLICT (name) DO NOTHING
RETURNING name, endpoints AS value, created_at, updated_at

-- name: catalogue_topic_get
-- A topic and its endpoints. POST /jobs {"topic"} reads it in the creating transaction:
-- a PUT or DELETE of the topic committed meanwhile writes this row, so one of the two
-- transactions retries (40001) and the jobs follow one version of the list.
SELECT name, endpoints AS value, created_at, updated_at FROM topics WHERE name = :name

-- name: catalogue_topic_list
-- Keyset page on idx_topics_created, newest first (as the other catalogue lists). The
-- cursor's line is kept only with a cursor (chalicelib/db/shapes.py): the first page and
-- the next ones are two statements, each of whose generic plans seeks the index at its
-- bound, where "(:after_ts IS NULL OR ...)" read every topic before the cursor.
SELECT name, endpoints AS value, created_at, updated_at FROM topics
WHERE TRUE
  AND (created_at, name) < (CAST(:after_ts AS TIMESTAMPTZ), CAST(:after_id AS TEXT)) -- if after_ts
ORDER BY created_at DESC, name DESC
LIMIT :limit_plus_one

-- name: catalogue_topic_update
-- PUT replaces the list; jobs created from the old one are not touched.
UPDATE topics SET endpoints = CAST(:value AS JSONB), updated_at = now()
WHERE name = :name
RETURNING name, endpoints AS value, created_at, updated_at

-- name: catalogue_topic_delete
-- A real delete: nothing refers to a topic (its jobs hold their own endpoint and key);
-- fk_topic_endpoints_topic removes its topic_endpoints rows with it.
DELETE FROM topics WHERE name = :name

-- name: topics_live_endpoints
-- Which of the names a topic lists are live endpoints (the rest is a 404). Read in the
-- topic's transaction: an endpoint deleted concurrently writes the row read here, and its
-- delete reads the topic_endpoints rows this transaction writes, so one of the two retries.
SELECT name FROM endpoints WHERE name = ANY(CAST(:names AS TEXT[])) AND deleted_at IS NULL

-- name: topics_link
-- One topic_endpoints row per endpoint of the list, in one statement.
INSERT INTO topic_endpoints (topic, endpoint)
SELECT CAST(:name AS TEXT), listed.endpoint
FROM jsonb_array_elements_text(CAST(:value AS JSONB)) AS listed (endpoint)

-- name: topics_unlink
-- Before a PUT links its new list (a separate statement: CockroachDB refuses one statement
-- that writes a table twice).
DELETE FROM topic_endpoints WHERE topic = :name

-- name: topics_naming_endpoint
-- Topics that name the endpoint: they keep it from being deleted (409, as every other
-- reference does). One probe of idx_topic_endpoints_endpoint, bounded; read in the
-- endpoint delete's transaction (see topics_live_endpoints for the race).
SELECT topic FROM topic_endpoints WHERE endpoint = :name ORDER BY topic LIMIT :limit
