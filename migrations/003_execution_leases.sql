-- Leases that a live worker renews (issue 15). A claim sets lease_expires_at to now plus
-- TE_STUCK_EXECUTION_TIMEOUT_SEC; the worker renews, in one statement per round, the
-- leases of what it still holds, so a delivery may take its whole timeout_ms without being
-- reclaimed, and a dead worker's executions expire one lease after its last renewal.
-- NULL (rows claimed before this migration) falls back to started_at plus the timeout in
-- the reclaimer.
ALTER TABLE executions ADD COLUMN lease_expires_at TIMESTAMPTZ;
