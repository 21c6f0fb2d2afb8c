-- 028_endpoint_auto_pause: endpoints that pause themselves.
--
-- An HTTP delivery answered 410 Gone pauses its endpoint in the transaction that records
-- the attempt (the worker's finalize, only for a batch holding such an answer); an
-- endpoint whose attempts have all failed for longer than its auto_pause_after_ms is
-- paused by the housekeeper. A pause is the existing one (paused_at: the claim passes the
-- endpoint over); what is new is why, a counter per automatic pause, and the state the
-- housekeeper keeps between its passes.

-- paused_reason: GONE, FAILING or OPERATOR while paused_at is set. Rows paused before this
-- migration were paused by hand: the reads show a NULL reason of a paused row as OPERATOR
-- (no backfill, so the migration writes no row).
ALTER TABLE endpoints ADD COLUMN paused_reason TEXT
    CONSTRAINT chk_endpoints_paused_reason CHECK (paused_reason IN ('GONE', 'FAILING', 'OPERATOR'));

-- auto_pause_after_ms: NULL turns the FAILING rule off. Existing endpoints get the default
-- a new one gets when it omits the field (chalicelib/domain/auto_pause.py, five days).
ALTER TABLE endpoints ADD COLUMN auto_pause_after_ms BIGINT DEFAULT 432000000;

-- te_endpoint_auto_paused_total{endpoint,reason}: one row per endpoint and reason, added
-- to in the transaction that pauses (so a retried transaction counts once, and every API
-- process reads the same figure, which survives restarts). Written only by automatic
-- pauses, which are rare: no contention worth sharding.
CREATE TABLE endpoint_auto_pauses (
    endpoint      TEXT          NOT NULL,
    reason        TEXT          NOT NULL,
    crdb_region   TEXT          NOT NULL DEFAULT 'default',
    total         BIGINT        NOT NULL DEFAULT 0,
    last_at       TIMESTAMPTZ   NOT NULL,
    CONSTRAINT pk_endpoint_auto_pauses PRIMARY KEY (endpoint, reason),
    CONSTRAINT chk_endpoint_auto_pauses_reason CHECK (reason IN ('GONE', 'FAILING'))
);

-- The FAILING rule's memory (chalicelib/domain/auto_pause.py, judge): per endpoint, the
-- attempts counted by outcome at the housekeeper's last look, and since when every new
-- attempt has failed. One row per endpoint, read and written a page of endpoints at a
-- time in name order (the primary key).
CREATE TABLE endpoint_failing (
    endpoint       TEXT          NOT NULL,
    crdb_region    TEXT          NOT NULL DEFAULT 'default',
    succeeded      BIGINT        NOT NULL,
    failed         BIGINT        NOT NULL,
    failing_since  TIMESTAMPTZ,
    checked_at     TIMESTAMPTZ   NOT NULL,
    CONSTRAINT pk_endpoint_failing PRIMARY KEY (endpoint)
);
