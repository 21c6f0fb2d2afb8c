-- name: api_key_scope
-- The authenticator's cache miss: the scope of the active key with this hash (no row: no
-- such key, or revoked). Looked up by hash: the plaintext key is never stored. Revoked keys
-- stop working at once for new processes and within the auth cache TTL for running ones.
SELECT scope FROM api_keys WHERE key_hash = :key_hash AND revoked_at IS NULL

-- name: api_key_insert
INSERT INTO api_keys (name, key_hash, scope) VALUES (:name, :key_hash, :scope)
RETURNING key_id, name, scope, created_at, revoked_at

-- name: api_key_insert_first_admin
-- The operator's bootstrap: an admin key only while no active admin key exists (one
-- statement, so two operators running it at once cannot both make one).
INSERT INTO api_keys (name, key_hash, scope)
SELECT :name, :key_hash, 'admin'
WHERE NOT EXISTS (SELECT 1 FROM api_keys WHERE scope = 'admin' AND revoked_at IS NULL)
RETURNING key_id, name, scope, created_at, revoked_at

-- name: api_key_list
-- GET /keys: every key, revoked ones included, newest first, keyset on (created_at, key_id).
-- Never the hash.
SELECT key_id, name, scope, created_at, revoked_at
FROM api_keys
WHERE CAST(:after_ts AS TIMESTAMPTZ) IS NULL
   OR (created_at, key_id) < (:after_ts, :after_id)
ORDER BY created_at DESC, key_id DESC
LIMIT :limit_plus_one

-- name: api_key_revoke
-- POST /keys/{key_id}/revoke: idempotent, a second revocation keeps the first time.
UPDATE api_keys SET revoked_at = COALESCE(revoked_at, now())
WHERE key_id = :key_id
RETURNING key_id, name, scope, created_at, revoked_at
