-- API keys carry a scope: 'read' may call every GET route, 'write' every route but key
-- administration, 'admin' every route. The API enforces it (chalicelib/api/auth.py).
--
-- Every key that exists before this migration becomes 'admin': until now any key could do
-- everything, so nothing a key could do before may stop working. Keys made afterwards name
-- their scope (the insert always passes it); the default only fills the existing rows.
ALTER TABLE api_keys ADD COLUMN scope TEXT NOT NULL DEFAULT 'admin'
    CONSTRAINT chk_api_key_scope CHECK (scope IN ('admin', 'write', 'read'));
