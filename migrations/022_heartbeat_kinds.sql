-- 022_heartbeat_kinds: each heartbeat says what kind of process wrote it (api, worker,
-- scheduler) and until when it counts as live.
--
-- A process beats every 5 s while it runs; a scheduled Lambda invocation's last beat says
-- the next invocation comes within a minute. fresh_until is that promise plus a grace:
-- GET /metrics counts per kind the rows still fresh (te_live_processes{kind}) and GET
-- /health answers 503 PROCESS_DOWN for a kind that has run (a row of it exists) with none
-- fresh, whatever the profile's rhythm. idx_region_heartbeats_kind serves both: the live
-- rows of a kind are a range of it, and "has run" is its first entry. Rows written before
-- this migration have neither column: they count as no kind until their process beats
-- again (or the housekeeper prunes them).
ALTER TABLE region_heartbeats ADD COLUMN kind TEXT;
ALTER TABLE region_heartbeats ADD COLUMN fresh_until TIMESTAMPTZ;
CREATE INDEX idx_region_heartbeats_kind ON region_heartbeats (kind, fresh_until);
