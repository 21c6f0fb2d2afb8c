-- 029_operation_retention: ended bulk operations leave after TE_OPERATION_RETENTION_DAYS
-- (the housekeeper, housekeeping_purge_operations).
--
-- The purge takes the operations that ended longest ago, a bounded batch at a time. This
-- index holds ended operations only, in the order the purge takes them, so a batch reads
-- its own rows and stops: a RUNNING operation has no entry (it is never purged, and
-- idx_bulk_operations_running serves the loop's pick), and the purge's cost follows what
-- it deletes, not the history kept.
CREATE INDEX idx_bulk_operations_ended
    ON bulk_operations (ended_at ASC, operation_id ASC)
    WHERE state IN ('DONE', 'ABORTED', 'FAILED');
