-- 001_initial: every table, constraint and index of the specification's schema.
--
-- Written in the subset PostgreSQL and CockroachDB both accept: TEXT (not STRING), BYTEA
-- (not BYTES), explicit BIGINT where a value can outgrow 4 bytes, gen_random_uuid(),
-- partial indexes. Identifiers carry the prefixes the API shows (job_, exec_, att_, log_),
-- so a row and its API representation never disagree.
--
-- Single region for now. When adding regions (CockroachDB only):
--   ALTER DATABASE taskexecutor SET PRIMARY REGION = 'ap-south-1';
--   ALTER DATABASE taskexecutor ADD REGION 'ap-south-2';
--   ALTER DATABASE taskexecutor SURVIVE ZONE FAILURE;
-- and crdb_region becomes crdb_internal_region with gateway_region() as default and the
-- tables get SET LOCALITY REGIONAL BY ROW.

CREATE TABLE payload_specs (
    name          TEXT          NOT NULL,
    schema_json   JSONB         NOT NULL,
    created_at    TIMESTAMPTZ   NOT NULL DEFAULT now(),
    updated_at    TIMESTAMPTZ   NOT NULL DEFAULT now(),
    CONSTRAINT pk_payload_specs PRIMARY KEY (name)
);

CREATE TABLE configs (
    name          TEXT          NOT NULL,
    values_json   JSONB         NOT NULL,
    created_at    TIMESTAMPTZ   NOT NULL DEFAULT now(),
    updated_at    TIMESTAMPTZ   NOT NULL DEFAULT now(),
    CONSTRAINT pk_configs PRIMARY KEY (name)
);

-- encrypted_value = version byte | key id (4 bytes) | nonce (12 bytes) | AES-256-GCM
-- ciphertext and tag, with the secret's name as associated data (chalicelib/crypto.py).
CREATE TABLE secrets (
    name              TEXT          NOT NULL,
    encrypted_value   BYTEA         NOT NULL,
    created_at        TIMESTAMPTZ   NOT NULL DEFAULT now(),
    updated_at        TIMESTAMPTZ   NOT NULL DEFAULT now(),
    CONSTRAINT pk_secrets PRIMARY KEY (name)
);

CREATE TABLE endpoints (
    name              TEXT          NOT NULL,
    endpoint_type     TEXT          NOT NULL,
    payload_spec_ref  TEXT,
    config_ref        TEXT,
    spec              JSONB         NOT NULL,
    retry_policy      JSONB,
    created_at        TIMESTAMPTZ   NOT NULL DEFAULT now(),
    updated_at        TIMESTAMPTZ   NOT NULL DEFAULT now(),
    CONSTRAINT pk_endpoints PRIMARY KEY (name),
    CONSTRAINT fk_endpoints_payload_spec FOREIGN KEY (payload_spec_ref) REFERENCES payload_specs (name),
    CONSTRAINT fk_endpoints_config FOREIGN KEY (config_ref) REFERENCES configs (name),
    CONSTRAINT chk_endpoint_type CHECK (endpoint_type IN ('HTTP', 'KAFKA', 'REDIS_STREAM'))
);

CREATE INDEX idx_endpoints_type ON endpoints (endpoint_type);

-- endpoint_snapshot: the endpoint (type, spec, retry policy, config and payload spec
-- references) as it was when the job was created, because endpoint updates apply to future
-- jobs only.
CREATE TABLE jobs (
    job_id                TEXT          NOT NULL DEFAULT 'job_' || replace(gen_random_uuid()::TEXT, '-', ''),
    crdb_region           TEXT          NOT NULL DEFAULT 'default',
    endpoint              TEXT          NOT NULL,
    endpoint_type         TEXT          NOT NULL,
    trigger_type          TEXT          NOT NULL,
    status                TEXT          NOT NULL DEFAULT 'ACTIVE',
    version               INT           NOT NULL DEFAULT 1,
    previous_version_id   TEXT,
    replaced_by_id        TEXT,
    idempotency_key       TEXT,
    input                 JSONB,
    run_at                TIMESTAMPTZ,
    cron_expression       TEXT,
    cron_timezone         TEXT,
    cron_starts_at        TIMESTAMPTZ,
    cron_ends_at          TIMESTAMPTZ,
    cron_next_run_at      TIMESTAMPTZ,
    cron_last_tick_at     TIMESTAMPTZ,
    endpoint_snapshot     JSONB,
    created_at            TIMESTAMPTZ   NOT NULL DEFAULT now(),
    retired_at            TIMESTAMPTZ,
    CONSTRAINT pk_jobs PRIMARY KEY (job_id),
    CONSTRAINT fk_jobs_endpoint FOREIGN KEY (endpoint) REFERENCES endpoints (name),
    CONSTRAINT chk_trigger_type CHECK (trigger_type IN ('IMMEDIATE', 'DELAYED', 'CRON')),
    CONSTRAINT chk_status CHECK (status IN ('ACTIVE', 'RETIRED')),
    CONSTRAINT chk_endpoint_type CHECK (endpoint_type IN ('HTTP', 'KAFKA', 'REDIS_STREAM'))
);

CREATE UNIQUE INDEX idx_jobs_idempotency
    ON jobs (endpoint, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

CREATE INDEX idx_jobs_cron_due
    ON jobs (cron_next_run_at)
    WHERE trigger_type = 'CRON' AND status = 'ACTIVE';

CREATE INDEX idx_jobs_endpoint
    ON jobs (endpoint, created_at DESC);

CREATE INDEX idx_jobs_status
    ON jobs (status, created_at DESC);

-- Keyset pagination of GET /jobs without a filter: (created_at, job_id) descending.
CREATE INDEX idx_jobs_created
    ON jobs (created_at DESC, job_id DESC);

-- config_snapshot: the config values the execution's first attempt resolved against, kept
-- for its retries ("in-flight executions use the config snapshot from when they started").
CREATE TABLE executions (
    execution_id    TEXT          NOT NULL DEFAULT 'exec_' || replace(gen_random_uuid()::TEXT, '-', ''),
    crdb_region     TEXT          NOT NULL DEFAULT 'default',
    job_id          TEXT          NOT NULL,
    endpoint        TEXT          NOT NULL,
    endpoint_type   TEXT          NOT NULL,
    idempotency_key TEXT,
    status          TEXT          NOT NULL DEFAULT 'PENDING',
    input           JSONB,
    output          JSONB,
    attempt_count   INT           NOT NULL DEFAULT 0,
    max_attempts    INT           NOT NULL DEFAULT 1,
    worker_id       TEXT,
    run_at          TIMESTAMPTZ   NOT NULL DEFAULT now(),
    started_at      TIMESTAMPTZ,
    completed_at    TIMESTAMPTZ,
    duration_ms     BIGINT,
    config_snapshot JSONB,
    created_at      TIMESTAMPTZ   NOT NULL DEFAULT now(),
    CONSTRAINT pk_executions PRIMARY KEY (execution_id),
    CONSTRAINT fk_executions_job FOREIGN KEY (job_id) REFERENCES jobs (job_id),
    CONSTRAINT chk_exec_status CHECK (status IN (
        'PENDING', 'QUEUED', 'RUNNING', 'RETRYING', 'SUCCESS', 'FAILED', 'CANCELLED'
    ))
);

-- THE hot-path query index: only claimable rows are in it, so the claim's cost does not
-- grow with terminal history.
CREATE INDEX idx_executions_pickup
    ON executions (status, run_at ASC)
    WHERE status IN ('QUEUED', 'RETRYING');

CREATE UNIQUE INDEX idx_executions_cron_dedup
    ON executions (job_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

CREATE INDEX idx_executions_by_job
    ON executions (job_id, created_at DESC);

CREATE INDEX idx_executions_running
    ON executions (status, started_at)
    WHERE status = 'RUNNING';

-- The delayed promoter's index: PENDING rows by due time.
CREATE INDEX idx_executions_pending
    ON executions (run_at ASC)
    WHERE status = 'PENDING';

CREATE TABLE attempts (
    attempt_id      TEXT          NOT NULL DEFAULT 'att_' || replace(gen_random_uuid()::TEXT, '-', ''),
    crdb_region     TEXT          NOT NULL DEFAULT 'default',
    execution_id    TEXT          NOT NULL,
    attempt_number  INT           NOT NULL,
    status          TEXT          NOT NULL,
    started_at      TIMESTAMPTZ   NOT NULL,
    completed_at    TIMESTAMPTZ,
    duration_ms     BIGINT,
    output          JSONB,
    error           JSONB,
    created_at      TIMESTAMPTZ   NOT NULL DEFAULT now(),
    CONSTRAINT pk_attempts PRIMARY KEY (attempt_id),
    CONSTRAINT fk_attempts_execution FOREIGN KEY (execution_id) REFERENCES executions (execution_id),
    CONSTRAINT uq_attempts_exec_number UNIQUE (execution_id, attempt_number),
    CONSTRAINT chk_attempt_status CHECK (status IN ('SUCCESS', 'FAILED'))
);

CREATE INDEX idx_attempts_by_execution
    ON attempts (execution_id, attempt_number ASC);

CREATE TABLE execution_logs (
    log_id          TEXT          NOT NULL DEFAULT 'log_' || replace(gen_random_uuid()::TEXT, '-', ''),
    crdb_region     TEXT          NOT NULL DEFAULT 'default',
    execution_id    TEXT          NOT NULL,
    attempt_number  INT           NOT NULL,
    level           TEXT          NOT NULL,
    message         TEXT          NOT NULL,
    logged_at       TIMESTAMPTZ   NOT NULL DEFAULT now(),
    CONSTRAINT pk_execution_logs PRIMARY KEY (log_id),
    CONSTRAINT fk_logs_execution FOREIGN KEY (execution_id) REFERENCES executions (execution_id),
    CONSTRAINT chk_log_level CHECK (level IN ('DEBUG', 'INFO', 'WARN', 'ERROR'))
);

CREATE INDEX idx_logs_by_execution
    ON execution_logs (execution_id, logged_at ASC);

CREATE INDEX idx_logs_by_attempt
    ON execution_logs (execution_id, attempt_number, logged_at ASC);

CREATE TABLE region_heartbeats (
    region        TEXT          NOT NULL,
    component     TEXT          NOT NULL,
    last_beat_at  TIMESTAMPTZ   NOT NULL DEFAULT now(),
    status        TEXT          NOT NULL DEFAULT 'ALIVE',
    metadata      JSONB,
    CONSTRAINT pk_region_heartbeats PRIMARY KEY (region, component)
);

CREATE TABLE region_status (
    region        TEXT          NOT NULL,
    alive         BOOL          NOT NULL DEFAULT true,
    failed_at     TIMESTAMPTZ,
    adopted_by    TEXT,
    updated_at    TIMESTAMPTZ   NOT NULL DEFAULT now(),
    CONSTRAINT pk_region_status PRIMARY KEY (region)
);

INSERT INTO region_status (region, alive, updated_at) VALUES ('default', true, now());

-- API keys are stored as SHA-256 hashes only; the plaintext is shown once, at creation.
CREATE TABLE api_keys (
    key_id        TEXT          NOT NULL DEFAULT 'key_' || replace(gen_random_uuid()::TEXT, '-', ''),
    name          TEXT          NOT NULL,
    key_hash      BYTEA         NOT NULL,
    created_at    TIMESTAMPTZ   NOT NULL DEFAULT now(),
    revoked_at    TIMESTAMPTZ,
    CONSTRAINT pk_api_keys PRIMARY KEY (key_id),
    CONSTRAINT uq_api_keys_hash UNIQUE (key_hash)
);
