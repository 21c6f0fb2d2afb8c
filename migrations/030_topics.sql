-- 030_topics: fan-out topics. A topic names endpoints; POST /jobs {"topic": NAME} creates one
-- job per endpoint it names, in one transaction.
--
-- topics holds the list as the API shows it (an ordered JSONB array of endpoint names);
-- topic_endpoints holds the same names one row each, so deleting an endpoint finds the
-- topics that name it on an index (idx_topic_endpoints_endpoint) instead of scanning every
-- topic's array. Both are written in the topic's own transaction. A topic is deleted for
-- real (its jobs keep nothing of it but their idempotency keys), its rows going with it.
CREATE TABLE topics (
    name          TEXT          NOT NULL,
    endpoints     JSONB         NOT NULL,
    created_at    TIMESTAMPTZ   NOT NULL DEFAULT now(),
    updated_at    TIMESTAMPTZ   NOT NULL DEFAULT now(),
    CONSTRAINT pk_topics PRIMARY KEY (name)
);

-- GET /topics pages newest first on (created_at, name).
CREATE INDEX idx_topics_created ON topics (created_at DESC, name DESC);

-- The endpoint side is a foreign key: endpoints are only ever soft-deleted, and a live
-- endpoint a topic names cannot be deleted (409), so the key always holds.
CREATE TABLE topic_endpoints (
    topic         TEXT          NOT NULL,
    endpoint      TEXT          NOT NULL,
    CONSTRAINT pk_topic_endpoints PRIMARY KEY (topic, endpoint),
    CONSTRAINT fk_topic_endpoints_topic FOREIGN KEY (topic) REFERENCES topics (name)
        ON DELETE CASCADE,
    CONSTRAINT fk_topic_endpoints_endpoint FOREIGN KEY (endpoint) REFERENCES endpoints (name)
);

CREATE INDEX idx_topic_endpoints_endpoint ON topic_endpoints (endpoint, topic);
