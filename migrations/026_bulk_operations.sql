-- 026_bulk_operations: bulk actions on executions (POST /executions/bulk), worked through
-- in pages in the background, with their progress (GET /operations/{id}).
--
-- One row per action, written when it is created and once per page: the page's
-- executions are acted on and the row's cursor and counters move in the same transaction
-- (chalicelib/services/operations.py), so a crash loses or repeats nothing. The set is
-- fixed by the row's created_at: a page reads only executions created before it, newest
-- first by (created_at, execution_id) from the cursor (after_ts, after_id) on, as
-- GET /executions lists them with the same filter. filter keeps the request's filter as
-- given (endpoint, statuses, error_type, created_after, created_before), normalized.
--
-- matched counts every execution a page read; done those acted on; refused the rest
-- (an execution the action does not apply to), so matched = done + refused.
CREATE TABLE bulk_operations (
    operation_id  TEXT          NOT NULL DEFAULT 'op_' || replace(gen_random_uuid()::TEXT, '-', ''),
    crdb_region   TEXT          NOT NULL DEFAULT 'default',
    action        TEXT          NOT NULL,
    filter        JSONB         NOT NULL,
    state         TEXT          NOT NULL DEFAULT 'RUNNING',
    matched       BIGINT        NOT NULL DEFAULT 0,
    done          BIGINT        NOT NULL DEFAULT 0,
    refused       BIGINT        NOT NULL DEFAULT 0,
    after_ts      TIMESTAMPTZ,
    after_id      TEXT,
    error         TEXT,
    created_at    TIMESTAMPTZ   NOT NULL DEFAULT now(),
    advanced_at   TIMESTAMPTZ   NOT NULL DEFAULT now(),
    ended_at      TIMESTAMPTZ,
    CONSTRAINT pk_bulk_operations PRIMARY KEY (operation_id),
    CONSTRAINT chk_bulk_operations_action CHECK (action IN ('retry', 'cancel', 'delete')),
    CONSTRAINT chk_bulk_operations_state CHECK (state IN ('RUNNING', 'DONE', 'ABORTED', 'FAILED'))
);

-- The loop's pick: the RUNNING operation that advanced longest ago (so several running
-- operations take turns, a page each). Partial: ended operations add no entry, so the
-- pick reads what is running, whatever the history.
CREATE INDEX idx_bulk_operations_running
    ON bulk_operations (advanced_at ASC, operation_id ASC)
    WHERE state = 'RUNNING';
