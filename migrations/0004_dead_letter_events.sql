-- Messages that can never be stored, written in the same transaction as their batch's rows so
-- that their offsets can pass. Identity: coordinates plus a hash of the full value (a
-- re-created topic reuses coordinates); replaying a partition must not multiply them.
CREATE TABLE dead_letter_events (
  id              BIGSERIAL PRIMARY KEY,
  pipeline        TEXT NOT NULL,
  topic           TEXT NOT NULL,
  partition       INTEGER NOT NULL,
  kafka_offset    BIGINT NOT NULL,
  kafka_timestamp TIMESTAMPTZ,
  message_key     BYTEA,
  -- Raw value bytes, even when not UTF-8; truncated to 64 KiB unless the message is valid and
  -- only waits for its application (reason unknown_application), in which case it is whole.
  payload         BYTEA,
  payload_size    INTEGER NOT NULL,
  payload_sha256  BYTEA NOT NULL,
  headers         JSONB NOT NULL DEFAULT '[]'::jsonb,
  reason          TEXT NOT NULL CHECK (reason IN ('invalid_encoding', 'invalid_json', 'invalid_message',
                                                  'unknown_application', 'empty_message',
                                                  'rejected_by_database')),
  detail          TEXT NOT NULL,
  created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
  redriven_at     TIMESTAMPTZ,
  CONSTRAINT dead_letter_events_identity UNIQUE (topic, partition, kafka_offset, payload_sha256)
);

CREATE INDEX dead_letter_events_pipeline_reason_idx ON dead_letter_events (pipeline, reason);
CREATE INDEX dead_letter_events_created_at_idx ON dead_letter_events (created_at);
CREATE INDEX dead_letter_events_pending_idx ON dead_letter_events (pipeline, id) WHERE redriven_at IS NULL;
