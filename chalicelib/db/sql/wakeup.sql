-- Wake-up accelerator (chalicelib/db/notify.py): PostgreSQL only, optional.
-- CockroachDB has no LISTEN/NOTIFY, so nothing here is on a required path: workers poll,
-- and these statements only end an idle worker's sleep early. notify.enabled() keeps them
-- off on CockroachDB (TE_WAKEUP_NOTIFY=auto) or anywhere with TE_WAKEUP_NOTIFY=off.
-- The channel name is notify.CHANNEL (a test checks they agree).

-- name: wakeup_server_version
-- Which server this is (TE_WAKEUP_NOTIFY=auto): CockroachDB's version() names it.
SELECT version() AS v

-- name: wakeup_publish
-- Sent inside the transaction that queued executions: PostgreSQL delivers it at COMMIT,
-- never for a rolled-back transaction, so a woken worker finds the rows committed.
SELECT pg_notify('te_executions_queued', '')

-- name: wakeup_listen
-- The listener's own connection subscribes once per (re)connect.
LISTEN te_executions_queued

-- name: wakeup_backend_pid
-- The listen connection's server pid (tests kill it to prove the listener reconnects).
SELECT pg_backend_pid()

-- name: wakeup_ping
-- Reads pending notifications, and doubles as the health check of an idle connection.
SELECT 1
