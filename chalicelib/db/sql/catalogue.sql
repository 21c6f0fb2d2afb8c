-- Setup and register resources: payload specs, configs, secrets, endpoints.
--
-- The three catalogue tables share one shape (name, one value column, timestamps), so their
-- statements share one set of parameter names: :name, :value. JSON values arrive as text
-- and are cast to JSONB explicitly (pg8000 would otherwise send them untyped).
--
-- Soft deletion (migrations/002_lifecycle.sql): payload specs, configs and endpoints are
-- never removed, only marked deleted_at; every statement here that serves the live API
-- filters "deleted_at IS NULL", and an insert over a deleted row revives it. Secrets are
-- deleted for real.
--
-- Lists are keyset-paginated on (created_at, name), newest first. The row comparison is
-- strict and the key is unique (name is the primary key), so a page never repeats or skips
-- a row that existed when the first page was read, whatever is inserted meanwhile.

-- name: catalogue_payload_spec_insert
-- ON CONFLICT on the name: a live row is left alone and no row comes back (409) instead of
-- the transaction aborting on a unique violation; a soft-deleted row is revived with the
-- new value and counts as created now.
INSERT INTO payload_specs (name, schema_json) VALUES (:name, CAST(:value AS JSONB))
ON CONFLICT (name) DO UPDATE
SET schema_json = excluded.schema_json, created_at = now(), updated_at = now(), deleted_at = NULL
WHERE payload_specs.deleted_at IS NOT NULL
RETURNING name, schema_json AS value, created_at, updated_at
-- name: catalogue_payload_spec_get
SELECT name, schema_json AS value, created_at, updated_at FROM payload_specs
WHERE name = :name AND deleted_at IS NULL

-- name: catalogue_payload_spec_list
SELECT name, schema_json AS value, created_at, updated_at FROM payload_specs
WHERE deleted_at IS NULL
  AND (CAST(:after_ts AS TIMESTAMPTZ) IS NULL
       OR (created_at, name) < (CAST(:after_ts AS TIMESTAMPTZ), CAST(:after_id AS TEXT)))
ORDER BY created_at DESC, name DESC
LIMIT :limit_plus_one

-- name: catalogue_payload_spec_update
UPDATE payload_specs SET schema_json = CAST(:value AS JSONB), updated_at = now()
WHERE name = :name AND deleted_at IS NULL
RETURNING name, schema_json AS value, created_at, updated_at

-- name: catalogue_payload_spec_dependents
-- Live endpoints referencing the payload spec (a deleted endpoint is history). Read in the
-- delete's SERIALIZABLE transaction: an endpoint registered concurrently reads the payload
-- spec's row that the delete writes, so one of the two retries (40001).
SELECT name FROM endpoints WHERE payload_spec_ref = :name AND deleted_at IS NULL
ORDER BY name LIMIT :limit

-- name: catalogue_payload_spec_live_jobs
-- live_jobs (migrations/002_lifecycle.sql) is the one definition of work that still uses
-- an endpoint snapshot: ACTIVE cron jobs and jobs with a non-terminal execution. Read in
-- the delete's SERIALIZABLE transaction: a job created concurrently inserts rows this read
-- ranges over (a jobs row, a PENDING/QUEUED execution), so one of the two transactions
-- fails with 40001 and its retry sees the other's outcome.
SELECT job_id FROM live_jobs WHERE endpoint_snapshot ->> 'payload_spec_ref' = :name
ORDER BY created_at DESC, job_id DESC LIMIT :limit

-- name: catalogue_payload_spec_delete
-- Soft delete: deleted endpoints keep their reference to the row (foreign key) and job
-- snapshots keep its name, so the row stays, marked.
UPDATE payload_specs SET deleted_at = now() WHERE name = :name AND deleted_at IS NULL
-- name: catalogue_config_insert
-- ON CONFLICT on the name: a live row is left alone and no row comes back (409) instead of
-- the transaction aborting on a unique violation; a soft-deleted row is revived with the
-- new value and counts as created now.
INSERT INTO configs (name, values_json) VALUES (:name, CAST(:value AS JSONB))
ON CONFLICT (name) DO UPDATE
SET values_json = excluded.values_json, created_at = now(), updated_at = now(), deleted_at = NULL
WHERE configs.deleted_at IS NOT NULL
RETURNING name, values_json AS value, created_at, updated_at
-- name: catalogue_config_get
SELECT name, values_json AS value, created_at, updated_at FROM configs
WHERE name = :name AND deleted_at IS NULL

-- name: catalogue_config_list
SELECT name, values_json AS value, created_at, updated_at FROM configs
WHERE deleted_at IS NULL
  AND (CAST(:after_ts AS TIMESTAMPTZ) IS NULL
       OR (created_at, name) < (CAST(:after_ts AS TIMESTAMPTZ), CAST(:after_id AS TEXT)))
ORDER BY created_at DESC, name DESC
LIMIT :limit_plus_one

-- name: catalogue_config_update
UPDATE configs SET values_json = CAST(:value AS JSONB), updated_at = now()
WHERE name = :name AND deleted_at IS NULL
RETURNING name, values_json AS value, created_at, updated_at

-- name: catalogue_config_dependents
-- Live endpoints referencing the config; same transaction and race argument as
-- catalogue_payload_spec_dependents.
SELECT name FROM endpoints WHERE config_ref = :name AND deleted_at IS NULL
ORDER BY name LIMIT :limit

-- name: catalogue_config_live_jobs
-- Live jobs whose endpoint snapshot names the config (see catalogue_payload_spec_live_jobs).
SELECT job_id FROM live_jobs WHERE endpoint_snapshot ->> 'config_ref' = :name
ORDER BY created_at DESC, job_id DESC LIMIT :limit

-- name: catalogue_config_secret_specs
-- The specs that may send a secret along with the config's values: live endpoints naming
-- the config, and the distinct endpoint snapshots of its live jobs (an endpoint replaced
-- since keeps sending through them), whose text mentions "secret." (candidates: the caller
-- keeps those with a real {{secret.*}} placeholder). Endpoints per config are few and
-- snapshots repeat (compared as text), so the read is small. It runs in the config
-- update's SERIALIZABLE transaction: an endpoint written concurrently is seen by one side
-- or the other.
SELECT CAST(spec AS TEXT) AS spec FROM endpoints
WHERE config_ref = :name AND deleted_at IS NULL AND strpos(CAST(spec AS TEXT), 'secret.') > 0
UNION
SELECT CAST(endpoint_snapshot -> 'spec' AS TEXT) AS spec FROM live_jobs
WHERE endpoint_snapshot ->> 'config_ref' = :name
  AND strpos(CAST(endpoint_snapshot -> 'spec' AS TEXT), 'secret.') > 0

-- name: catalogue_config_delete
-- Soft delete: deleted endpoints keep their reference to the row (foreign key) and job
-- snapshots keep its name, so the row stays, marked.
UPDATE configs SET deleted_at = now() WHERE name = :name AND deleted_at IS NULL
-- name: catalogue_secret_insert
-- The value is ciphertext (chalicelib/crypto.py); RETURNING never includes it, so it
-- cannot reach a response by accident.
INSERT INTO secrets (name, encrypted_value) VALUES (:name, :value)
ON CONFLICT (name) DO NOTHING
RETURNING name, created_at, updated_at

-- name: catalogue_secret_get
SELECT name, created_at, updated_at FROM secrets WHERE name = :name

-- name: catalogue_secret_list
SELECT name, created_at, updated_at FROM secrets
WHERE CAST(:after_ts AS TIMESTAMPTZ) IS NULL
   OR (created_at, name) < (CAST(:after_ts AS TIMESTAMPTZ), CAST(:after_id AS TEXT))
ORDER BY created_at DESC, name DESC
LIMIT :limit_plus_one

-- name: catalogue_secret_update
-- Rotation: a new ciphertext (fresh nonce, current key) replaces the old one. When the new
-- value is a signing key (:keep_previous), the replaced ciphertext is kept with the time
-- of the rotation, for the signing rotation window (right-hand sides read the row as it
-- was); any other value clears both, so an old value never outlives its replacement longer
-- than it must.
UPDATE secrets
SET previous_encrypted_value = CASE WHEN :keep_previous THEN encrypted_value END,
    rotated_at = CASE WHEN :keep_previous THEN now() END,
    encrypted_value = :value,
    updated_at = now()
WHERE name = :name
RETURNING name, created_at, updated_at

-- name: catalogue_secret_dependents
-- Secrets are referenced from inside endpoint specs ({{secret.<name>}}), not by a foreign
-- key, so this read is the only guard. strpos narrows the candidates cheaply; the caller
-- parses the placeholders to drop false positives (a longer name that starts the same).
-- Run in the same SERIALIZABLE transaction as the delete: an endpoint registered
-- concurrently reads this secret's row, so one of the two transactions fails with 40001
-- and is retried against the other's result. An endpoint that signs with the secret
-- (spec.signing_secret) depends on it too.
SELECT name, spec FROM endpoints
WHERE (strpos(CAST(spec AS TEXT), :needle) > 0 OR spec ->> 'signing_secret' = :name)
  AND deleted_at IS NULL
ORDER BY name

-- name: catalogue_secret_live_jobs
-- Live jobs whose endpoint snapshot's spec uses the secret (see
-- catalogue_payload_spec_live_jobs). :pattern matches "{{", then anything but "}", then
-- "secret.<name>" not followed by a name character: every {{secret.<name>}} placeholder
-- matches (whitespace or its JSON escapes included), so the check is exact or errs on the
-- side of refusing, and it can be bounded by LIMIT. The pattern is built from a stored
-- name, never from request text. A snapshot that signs with the secret counts too.
SELECT job_id FROM live_jobs
WHERE CAST(endpoint_snapshot -> 'spec' AS TEXT) ~ :pattern
   OR endpoint_snapshot -> 'spec' ->> 'signing_secret' = :name
ORDER BY created_at DESC, job_id DESC LIMIT :limit

-- name: catalogue_secret_delete
-- A real delete: the ciphertext must not outlive the secret.
DELETE FROM secrets WHERE name = :name

-- name: catalogue_secret_ciphertext
-- Registration checks that a signing secret's value has the whsec_ form: it reads the row
-- in its transaction (a concurrent delete then conflicts, as with catalogue_secrets_existing)
-- and decrypts it in the service; the value never leaves the service.
SELECT encrypted_value FROM secrets WHERE name = :name

-- name: catalogue_secret_signers
-- Endpoints and live jobs that sign with the secret: a rotation to a value that is not a
-- signing key would break their deliveries, so it is refused.
(SELECT 'endpoint' AS kind, name AS ref FROM endpoints
 WHERE spec ->> 'signing_secret' = :name AND deleted_at IS NULL
 ORDER BY name LIMIT :limit)
UNION ALL
(SELECT 'job' AS kind, job_id AS ref FROM live_jobs
 WHERE endpoint_snapshot -> 'spec' ->> 'signing_secret' = :name
 ORDER BY created_at DESC, job_id DESC LIMIT :limit)

-- name: catalogue_secrets_existing
-- Registration reads the rows of every secret an endpoint references, inside its
-- transaction, which is what makes a concurrent secret delete conflict with it.
SELECT name FROM secrets WHERE name = ANY(CAST(:names AS TEXT[]))

-- part: endpoint_view
-- The columns every endpoint read and write answers with (EndpointView.from_row), of the
-- including statement's "endpoint_row" CTE (the rows it reads or writes, all columns): the
-- definition, then the operator state: a Retry-After hold that has passed reads as none, and
-- a paused row's NULL reason (paused before reasons were kept, all by hand) as OPERATOR.
endpoint_view AS (
    SELECT
        name, endpoint_type, payload_spec_ref, config_ref, spec, retry_policy, on_success,
        on_failure, created_at, updated_at, flow_control, ordering, paused_at,
        CASE WHEN held_until > now() THEN held_until END AS held_until, auto_pause_after_ms,
        CASE WHEN paused_at IS NOT NULL THEN COALESCE(paused_reason, 'OPERATOR') END
            AS paused_reason
    FROM endpoint_row
)

-- name: catalogue_endpoint_insert
-- ON CONFLICT on the name: a live endpoint is left alone and no row comes back (409); a
-- soft-deleted one is registered again with the new definition, as if created now (its
-- old jobs keep their own snapshots), running (not paused, not held).
WITH endpoint_row AS (
    INSERT INTO endpoints (name, endpoint_type, payload_spec_ref, config_ref, spec, retry_policy,
                           on_success, on_failure, flow_control, auto_pause_after_ms, ordering)
    VALUES (:name, :endpoint_type, :payload_spec_ref, :config_ref, CAST(:spec AS JSONB),
            CAST(:retry_policy AS JSONB), CAST(:on_success AS TEXT), CAST(:on_failure AS TEXT),
            CAST(:flow_control AS JSONB), CAST(:auto_pause_after_ms AS BIGINT),
            CAST(:ordering AS JSONB))
    ON CONFLICT (name) DO UPDATE
    SET endpoint_type = excluded.endpoint_type, payload_spec_ref = excluded.payload_spec_ref,
        config_ref = excluded.config_ref, spec = excluded.spec,
        retry_policy = excluded.retry_policy, on_success = excluded.on_success,
        on_failure = excluded.on_failure, flow_control = excluded.flow_control,
        auto_pause_after_ms = excluded.auto_pause_after_ms, ordering = excluded.ordering,
        paused_at = NULL, paused_reason = NULL, held_until = NULL, created_at = now(),
        updated_at = now(), deleted_at = NULL
    WHERE endpoints.deleted_at IS NOT NULL
    RETURNING *
)
, -- include: endpoint_view
SELECT * FROM endpoint_view

-- name: catalogue_endpoint_get
WITH endpoint_row AS (
    SELECT * FROM endpoints WHERE name = :name AND deleted_at IS NULL
)
, -- include: endpoint_view
SELECT * FROM endpoint_view

-- name: catalogue_endpoint_list
-- GET /endpoints, optionally only the paused (:paused true) or the running (false) ones,
-- and only the names :names holds (:among true) or does not (false): a health filter, the
-- names judged from the overview's per-endpoint counts (chalicelib/domain/endpoint_listing.py).
-- NULL leaves a filter off. A read of the endpoints table alone, whose size is the number
-- of endpoints registered, never the executions'.
WITH endpoint_row AS (
    SELECT *
    FROM endpoints
    WHERE deleted_at IS NULL
      AND (CAST(:paused AS BOOL) IS NULL OR (paused_at IS NOT NULL) = CAST(:paused AS BOOL))
      AND (CAST(:among AS BOOL) IS NULL
           OR (name = ANY(CAST(:names AS TEXT[]))) = CAST(:among AS BOOL))
      AND (CAST(:after_ts AS TIMESTAMPTZ) IS NULL
           OR (created_at, name) < (CAST(:after_ts AS TIMESTAMPTZ), CAST(:after_id AS TEXT)))
    ORDER BY created_at DESC, name DESC
    LIMIT :limit_plus_one
)
, -- include: endpoint_view
SELECT * FROM endpoint_view
ORDER BY created_at DESC, name DESC

-- name: catalogue_endpoint_update
-- PUT replaces the whole definition. Jobs keep the endpoint_snapshot taken at their
-- creation, so this changes future jobs only. flow_control is read live by the claim, so
-- it applies at once to every job of the endpoint, as does auto_pause_after_ms (the
-- housekeeper reads it live). A pause (and its reason) or hold is not part of the
-- definition and stays as it is.
WITH endpoint_row AS (
    UPDATE endpoints
    SET endpoint_type = :endpoint_type, payload_spec_ref = :payload_spec_ref,
        config_ref = :config_ref, spec = CAST(:spec AS JSONB),
        retry_policy = CAST(:retry_policy AS JSONB), on_success = CAST(:on_success AS TEXT),
        on_failure = CAST(:on_failure AS TEXT), flow_control = CAST(:flow_control AS JSONB),
        auto_pause_after_ms = CAST(:auto_pause_after_ms AS BIGINT),
        ordering = CAST(:ordering AS JSONB), updated_at = now()
    WHERE name = :name AND deleted_at IS NULL
    RETURNING *
)
, -- include: endpoint_view
SELECT * FROM endpoint_view

-- name: catalogue_endpoint_live_jobs
-- Live jobs of the endpoint: they keep it from being deleted (the specification: delete
-- "fails if active jobs reference it"). Finished and retired jobs are history and do not:
-- the soft delete keeps fk_jobs_endpoint satisfied. Same race argument as
-- catalogue_payload_spec_live_jobs; job creation also reads the endpoint row the delete marks.
SELECT job_id FROM live_jobs WHERE endpoint = :name
ORDER BY created_at DESC, job_id DESC LIMIT :limit

-- name: catalogue_endpoint_dependents
-- Live endpoints whose default callbacks (on_success / on_failure) name the endpoint: a job
-- created on them takes those defaults, and would be refused (422 INVALID_CALLBACK) once
-- it is deleted. An endpoint naming itself does not keep itself. Same transaction and race
-- argument as catalogue_payload_spec_dependents (a registration naming a callback reads its
-- row, which the delete writes).
SELECT name FROM endpoints
WHERE (on_success = :name OR on_failure = :name) AND name <> :name AND deleted_at IS NULL
ORDER BY name LIMIT :limit

-- name: catalogue_endpoint_live_callbacks
-- Live work that names the endpoint as the target of a callback yet to fire: deleting it
-- would lose the callback (the finalize could only log "No callback job"). Finished work
-- does not count: its callbacks fired or never will.
--   * jobs: ACTIVE cron jobs (each tick copies their on_success / on_failure onto its
--     execution) and jobs with a non-terminal execution naming it (the finalize reads the
--     execution's copy). Each arm walks the partial index of live work whose predicate it
--     repeats, as live_jobs does (idx_jobs_cron_due, idx_executions_pickup or _due,
--     idx_executions_ordering and idx_executions_concurrency for the executions waiting
--     for their key's turn,
--     idx_executions_pending, idx_executions_running) and filters its rows: the cost is
--     what is live, never history.
--   * batches: on_complete names it, a child execution is still live (the same partial
--     indexes; cron ticks carry no batch_id), and it has not fired yet (no 'batch:<id>' job
--     on the endpoint, idx_jobs_idempotency): a batch reopened by a retried member does
--     not fire again.
-- Read in the delete's SERIALIZABLE transaction: a job or batch created concurrently with
-- the endpoint as a callback reads the endpoint's row (check_callbacks) and inserts a live
-- execution this read ranges over, so one of the two fails with 40001.
(SELECT 'job' AS kind, j.job_id AS ref FROM jobs AS j
 WHERE j.job_id IN (
     SELECT job_id FROM jobs
     WHERE trigger_type = 'CRON' AND status = 'ACTIVE'
       AND (on_success = :name OR on_failure = :name)
     UNION ALL
     SELECT job_id FROM executions
     WHERE status IN ('QUEUED', 'RETRYING') AND NOT ordering_wait
       AND (on_success = :name OR on_failure = :name)
     UNION ALL
     SELECT job_id FROM executions
     WHERE ordering_key IS NOT NULL AND ordering_wait
       AND status IN ('PENDING', 'QUEUED', 'RUNNING', 'RETRYING')
       AND (on_success = :name OR on_failure = :name)
     UNION ALL
     SELECT job_id FROM executions
     WHERE concurrency_key IS NOT NULL AND ordering_wait
       AND status IN ('PENDING', 'QUEUED', 'RUNNING', 'RETRYING')
       AND (on_success = :name OR on_failure = :name)
     UNION ALL
     SELECT job_id FROM executions
     WHERE status = 'PENDING' AND (on_success = :name OR on_failure = :name)
     UNION ALL
     SELECT job_id FROM executions
     WHERE status = 'RUNNING' AND (on_success = :name OR on_failure = :name)
 )
 ORDER BY j.created_at DESC, j.job_id DESC LIMIT :limit)
UNION ALL
(SELECT 'batch' AS kind, b.batch_id AS ref FROM batches AS b
 WHERE b.on_complete = :name
   AND b.batch_id IN (
       SELECT batch_id FROM executions
       WHERE status IN ('QUEUED', 'RETRYING') AND NOT ordering_wait AND batch_id IS NOT NULL
       UNION ALL
       SELECT batch_id FROM executions
       WHERE ordering_key IS NOT NULL AND ordering_wait
         AND status IN ('PENDING', 'QUEUED', 'RUNNING', 'RETRYING') AND batch_id IS NOT NULL
       UNION ALL
       SELECT batch_id FROM executions
       WHERE concurrency_key IS NOT NULL AND ordering_wait
         AND status IN ('PENDING', 'QUEUED', 'RUNNING', 'RETRYING') AND batch_id IS NOT NULL
       UNION ALL
       SELECT batch_id FROM executions WHERE status = 'PENDING' AND batch_id IS NOT NULL
       UNION ALL
       SELECT batch_id FROM executions WHERE status = 'RUNNING' AND batch_id IS NOT NULL
   )
   AND NOT EXISTS (
       SELECT 1 FROM jobs AS fired
       WHERE fired.endpoint = :name AND fired.idempotency_key = 'batch:' || b.batch_id
   )
 ORDER BY b.created_at DESC, b.batch_id DESC LIMIT :limit)

-- name: catalogue_endpoint_delete
-- Soft delete: the endpoint's jobs, executions, attempts and logs stay readable, and
-- fk_jobs_endpoint keeps pointing at this row.
UPDATE endpoints SET deleted_at = now() WHERE name = :name AND deleted_at IS NULL

-- name: catalogue_endpoint_flow_ensure
-- The endpoint's flow-control row (migrations/006), written with a definition that has
-- flow_control: the worker's metered claim locks it, so it must exist before a claim can
-- see the definition (same transaction). A rate limit starts with a full bucket (:tokens,
-- its limit, available at once: "1 per day" delivers its first execution now, not a day
-- later) when the endpoint is new or had no rate limit before this definition (:fill).
-- Otherwise an existing row keeps its tokens (a changed limit bounds them at the next
-- claim; sending the same definition again does not refill the bucket).
INSERT INTO endpoint_flow (endpoint, tokens, refilled_at)
VALUES (:name, CAST(:tokens AS FLOAT8), now())
ON CONFLICT (endpoint) DO UPDATE
SET tokens = excluded.tokens, refilled_at = excluded.refilled_at
WHERE CAST(:fill AS BOOLEAN)

-- name: catalogue_endpoint_pause
-- POST /endpoints/{name}/pause. COALESCE keeps the first paused_at (idempotent). From the
-- commit on, no claim takes the endpoint's executions (the claim reads paused_at on the
-- endpoints row it joins); they wait QUEUED/RETRYING and stay cancellable. A pause by
-- hand is an OPERATOR pause; pausing an endpoint that is already paused keeps the reason
-- its pause began with, as it keeps paused_at (SET reads the row as it was).
WITH endpoint_row AS (
    UPDATE endpoints
    SET paused_at = COALESCE(paused_at, now()),
        paused_reason = CASE WHEN paused_at IS NULL THEN 'OPERATOR' ELSE paused_reason END
    WHERE name = :name AND deleted_at IS NULL
    RETURNING *
)
, -- include: endpoint_view
SELECT * FROM endpoint_view

-- name: catalogue_endpoint_resume
-- POST /endpoints/{name}/resume (idempotent). A hold from a Retry-After is not lifted: it
-- is the target's own word on when it can take more. Resuming clears the reason of any
-- pause (GONE, FAILING or OPERATOR).
WITH endpoint_row AS (
    UPDATE endpoints SET paused_at = NULL, paused_reason = NULL
    WHERE name = :name AND deleted_at IS NULL
    RETURNING *
)
, -- include: endpoint_view
SELECT * FROM endpoint_view
