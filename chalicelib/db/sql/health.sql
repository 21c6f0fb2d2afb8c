-- Health stubs: heartbeats and region status. Written and read today, acted on later
-- (multi-region failover), so the statements exist and run but decide nothing.

-- name: health_heartbeat_upsert
-- One row per (region, component), overwritten on every beat: the table holds each
-- component's latest sign of life, not a history. The explicit conflict target is the
-- primary key (CockroachDB has UPSERT, PostgreSQL does not; ON CONFLICT works on both).
-- fresh_until is when the row stops counting as a live process of its kind (migration 022).
INSERT INTO region_heartbeats (region, component, last_beat_at, status, metadata, kind, fresh_until)
VALUES (:region, :component, CAST(:now AS TIMESTAMPTZ), :status, CAST(:metadata AS JSONB),
        :kind, CAST(:fresh_until AS TIMESTAMPTZ))
ON CONFLICT (region, component) DO UPDATE
SET last_beat_at = excluded.last_beat_at,
    status = excluded.status,
    metadata = excluded.metadata,
    kind = excluded.kind,
    fresh_until = excluded.fresh_until

-- name: health_region_status
-- Every region's row; the refresher logs what it read but serves ["default"] regardless
-- (multi-region is a stub: nothing decides failover yet).
SELECT region, alive, failed_at, adopted_by, updated_at
FROM region_status
ORDER BY region
