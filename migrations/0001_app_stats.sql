-- app-stats: one row per app per crawl. Append-only: a redelivery (same app, same microsecond
-- crawl) is a DO NOTHING conflict on the natural key.
CREATE TABLE app_stats (
  id               BIGSERIAL PRIMARY KEY,
  application_id   BIGINT NOT NULL REFERENCES apps_registry_application (id),
  crawled_at       TIMESTAMPTZ NOT NULL,
  score            DOUBLE PRECISION CHECK (score BETWEEN 0 AND 5),
  ratings_count    BIGINT CHECK (ratings_count >= 0),
  reviews_count    BIGINT CHECK (reviews_count >= 0),
  min_installs     BIGINT CHECK (min_installs >= 0),
  real_installs    BIGINT CHECK (real_installs >= 0),
  histogram        BIGINT[] CHECK (histogram IS NULL OR cardinality(histogram) = 5),
  price            NUMERIC(12, 2) CHECK (price >= 0),
  currency         CHAR(3),
  app_version      VARCHAR(64),
  app_updated_at   TIMESTAMPTZ,
  source_partition INTEGER,
  source_offset    BIGINT,
  ingested_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
  CONSTRAINT app_stats_natural_key UNIQUE (application_id, crawled_at)
);

-- The foreign key's index: app_stats_natural_key's index leads with application_id and serves
-- the FK checks of apps_registry_application deletes; a second one would only slow inserts.
COMMENT ON CONSTRAINT app_stats_natural_key ON app_stats IS
  'Natural key; its index (leading application_id) is also the index of the application_id foreign key.';
