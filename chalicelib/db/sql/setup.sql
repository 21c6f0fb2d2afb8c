-- Setup and register resources: payload specs, configs, secrets, endpoints.
--
-- The three setup tables share one shape (name, one value column, timestamps), so their
-- statements share one set of parameter names: :name, :value. JSON values arrive as text
-- and are cast to JSONB explicitly (pg8000 would otherwise send them untyped).
--
-- Lists are keyset-paginated on (created_at, name), newest first. The row comparison is
-- strict and the key is unique (name is the primary key), so a page never repeats or skips
-- a row that existed when the first page was read, whatever is inserted meanwhile.

-- name: setup_payload_spec_insert
-- ON CONFLICT DO NOTHING: a duplicate name returns no row (409) instead of aborting the
-- transaction with a unique violation.
INSERT INTO payload_specs (name, schema_json) VALUES (:name, CAST(:value AS JSONB))
ON CONFLICT (name) DO NOTHING
RETURNING name, schema_json AS value, created_at, updated_at

-- name: setup_payload_spec_get
SELECT name, schema_json AS value, created_at, updated_at FROM payload_specs WHERE name = :name

-- name: setup_payload_spec_list
SELECT name, schema_json AS value, created_at, updated_at FROM payload_specs
WHERE CAST(:after_ts AS TIMESTAMPTZ) IS NULL
   OR (created_at, name) < (CAST(:after_ts AS TIMESTAMPTZ), CAST(:after_id AS TEXT))
ORDER BY created_at DESC, name DESC
LIMIT :limit_plus_one

-- name: setup_payload_spec_update
UPDATE payload_specs SET schema_json = CAST(:value AS JSONB), updated_at = now()
WHERE name = :name
RETURNING name, schema_json AS value, created_at, updated_at

-- name: setup_payload_spec_dependents
-- Read in the delete's transaction; fk_endpoints_payload_spec catches an endpoint that a
-- concurrent transaction adds after this read.
SELECT name FROM endpoints WHERE payload_spec_ref = :name ORDER BY name LIMIT :limit

-- name: setup_payload_spec_delete
DELETE FROM payload_specs WHERE name = :name

-- name: setup_config_insert
-- ON CONFLICT DO NOTHING: a duplicate name returns no row (409).
INSERT INTO configs (name, values_json) VALUES (:name, CAST(:value AS JSONB))
ON CONFLICT (name) DO NOTHING
RETURNING name, values_json AS value, created_at, updated_at

-- name: setup_config_get
SELECT name, values_json AS value, created_at, updated_at FROM configs WHERE name = :name

-- name: setup_config_list
SELECT name, values_json AS value, created_at, updated_at FROM configs
WHERE CAST(:after_ts AS TIMESTAMPTZ) IS NULL
   OR (created_at, name) < (CAST(:after_ts AS TIMESTAMPTZ), CAST(:after_id AS TEXT))
ORDER BY created_at DESC, name DESC
LIMIT :limit_plus_one

-- name: setup_config_update
UPDATE configs SET values_json = CAST(:value AS JSONB), updated_at = now()
WHERE name = :name
RETURNING name, values_json AS value, created_at, updated_at

-- name: setup_config_dependents
-- Read in the delete's transaction; fk_endpoints_config catches a concurrent newcomer.
SELECT name FROM endpoints WHERE config_ref = :name ORDER BY name LIMIT :limit

-- name: setup_config_delete
DELETE FROM configs WHERE name = :name

-- name: setup_secret_insert
-- The value is ciphertext (chalicelib/crypto.py); RETURNING never includes it, so it
-- cannot reach a response by accident.
INSERT INTO secrets (name, encrypted_value) VALUES (:name, :value)
ON CONFLICT (name) DO NOTHING
RETURNING name, created_at, updated_at

-- name: setup_secret_get
SELECT name, created_at, updated_at FROM secrets WHERE name = :name

-- name: setup_secret_list
SELECT name, created_at, updated_at FROM secrets
WHERE CAST(:after_ts AS TIMESTAMPTZ) IS NULL
   OR (created_at, name) < (CAST(:after_ts AS TIMESTAMPTZ), CAST(:after_id AS TEXT))
ORDER BY created_at DESC, name DESC
LIMIT :limit_plus_one

-- name: setup_secret_update
-- Rotation: a new ciphertext (fresh nonce, current key) replaces the old one.
UPDATE secrets SET encrypted_value = :value, updated_at = now()
WHERE name = :name
RETURNING name, created_at, updated_at

-- name: setup_secret_dependents
-- Secrets are referenced from inside endpoint specs ({{secret.<name>}}), not by a foreign
-- key, so this read is the only guard. strpos narrows the candidates cheaply; the caller
-- parses the placeholders to drop false positives (a longer name that starts the same).
-- Run in the same SERIALIZABLE transaction as the delete: an endpoint registered
-- concurrently reads this secret's row, so one of the two transactions fails with 40001
-- and is retried against the other's result.
SELECT name, spec FROM endpoints WHERE strpos(CAST(spec AS TEXT), :needle) > 0 ORDER BY name

-- name: setup_secret_delete
DELETE FROM secrets WHERE name = :name

-- name: setup_secrets_existing
-- Registration reads the rows of every secret an endpoint references, inside its
-- transaction, which is what makes a concurrent secret delete conflict with it.
SELECT name FROM secrets WHERE name = ANY(CAST(:names AS TEXT[]))

-- name: setup_endpoint_insert
-- ON CONFLICT DO NOTHING on the name only: foreign keys still reject a payload spec or
-- config deleted after the caller checked it.
INSERT INTO endpoints (name, endpoint_type, payload_spec_ref, config_ref, spec, retry_policy)
VALUES (:name, :endpoint_type, :payload_spec_ref, :config_ref, CAST(:spec AS JSONB),
        CAST(:retry_policy AS JSONB))
ON CONFLICT (name) DO NOTHING
RETURNING name, endpoint_type, payload_spec_ref, config_ref, spec, retry_policy, created_at,
          updated_at

-- name: setup_endpoint_get
SELECT name, endpoint_type, payload_spec_ref, config_ref, spec, retry_policy, created_at,
       updated_at
FROM endpoints WHERE name = :name

-- name: setup_endpoint_list
SELECT name, endpoint_type, payload_spec_ref, config_ref, spec, retry_policy, created_at,
       updated_at
FROM endpoints
WHERE CAST(:after_ts AS TIMESTAMPTZ) IS NULL
   OR (created_at, name) < (CAST(:after_ts AS TIMESTAMPTZ), CAST(:after_id AS TEXT))
ORDER BY created_at DESC, name DESC
LIMIT :limit_plus_one

-- name: setup_endpoint_update
-- PUT replaces the whole definition. Jobs keep the endpoint_snapshot taken at their
-- creation, so this changes future jobs only.
UPDATE endpoints
SET endpoint_type = :endpoint_type, payload_spec_ref = :payload_spec_ref,
    config_ref = :config_ref, spec = CAST(:spec AS JSONB),
    retry_policy = CAST(:retry_policy AS JSONB), updated_at = now()
WHERE name = :name
RETURNING name, endpoint_type, payload_spec_ref, config_ref, spec, retry_policy, created_at,
          updated_at

-- name: setup_endpoint_jobs
-- Jobs that keep an endpoint from being deleted, ACTIVE ones first. Retired jobs block too:
-- fk_jobs_endpoint keeps their history pointing at the endpoint. The same foreign key
-- catches a job created concurrently after this read.
SELECT job_id, status FROM jobs WHERE endpoint = :name
ORDER BY CASE WHEN status = 'ACTIVE' THEN 0 ELSE 1 END, created_at DESC, job_id DESC
LIMIT :limit

-- name: setup_endpoint_delete
DELETE FROM endpoints WHERE name = :name
