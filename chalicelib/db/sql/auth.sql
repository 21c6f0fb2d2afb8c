-- name: api_key_is_active
-- Looked up by hash: the plaintext key is never stored. Revoked keys stop working at once
-- for new processes and within the auth cache TTL for running ones.
SELECT 1 AS ok FROM api_keys WHERE key_hash = :key_hash AND revoked_at IS NULL

-- name: api_key_insert
INSERT INTO api_keys (name, key_hash) VALUES (:name, :key_hash)
RETURNING key_id, name, created_at

-- name: api_key_revoke
UPDATE api_keys SET revoked_at = now() WHERE key_id = :key_id AND revoked_at IS NULL
