-- reviews: the only table that really updates (thumbs-up counts, replies). The upsert's guard
-- (EXCLUDED.last_synced_at > reviews.last_synced_at) stops an older or replayed version from
-- overwriting newer data. first_seen_at and sentiment are never written by an update.
CREATE TABLE reviews (
  id                     BIGSERIAL PRIMARY KEY,
  review_id              VARCHAR(255) NOT NULL,
  application_id         BIGINT NOT NULL REFERENCES apps_registry_application (id),
  user_name              VARCHAR(255),
  content                TEXT,
  score                  SMALLINT NOT NULL CHECK (score BETWEEN 1 AND 5),
  thumbs_up_count        INTEGER NOT NULL CHECK (thumbs_up_count >= 0),
  review_created_version VARCHAR(64),
  app_version            VARCHAR(64),
  reviewed_at            TIMESTAMPTZ NOT NULL,
  reply_content          TEXT,
  replied_at             TIMESTAMPTZ,
  last_synced_at         TIMESTAMPTZ NOT NULL,
  first_seen_at          TIMESTAMPTZ NOT NULL DEFAULT now(),
  -- Owned by a future sentiment service; storage-consumer never writes it.
  sentiment              REAL,
  source_partition       INTEGER,
  source_offset          BIGINT,
  ingested_at            TIMESTAMPTZ NOT NULL DEFAULT now(),
  CONSTRAINT reviews_natural_key UNIQUE (review_id)
);

CREATE INDEX reviews_application_id_idx ON reviews (application_id);
