-- The audit trail (docs/operations.md): every operator action that changes state (replay,
-- dlq purge, dlq redrive, pause, resume) leaves one row, written in the action's own
-- transaction where the action is a database change, right after it otherwise (a replay's
-- offset reset lives in Kafka). `outcome` holds counts, offsets before and after per partition
-- and skipped ranges, in the shape the command documents.
CREATE TABLE operator_actions (
  id        BIGSERIAL PRIMARY KEY,
  time      TIMESTAMPTZ NOT NULL DEFAULT now(),
  -- OS user@host of the operator, or STORAGE_ACTOR when set (an HTTP caller, a CI job).
  actor     TEXT NOT NULL,
  -- e.g. 'dlq purge', 'dlq redrive', 'replay', 'pause', 'resume'.
  command   TEXT NOT NULL,
  arguments JSONB NOT NULL DEFAULT '{}'::jsonb,
  outcome   JSONB NOT NULL DEFAULT '{}'::jsonb
);

CREATE INDEX operator_actions_time_idx ON operator_actions (time);

-- Exact dead-letter counting: the invocation whose transaction stored the letter. When a
-- COMMIT's acknowledgement is lost, the next attempt of the same invocation finds the letter
-- already stored; it still counts as new because its invocation_id is this invocation's.
-- NULL for letters stored before this migration.
ALTER TABLE dead_letter_events ADD COLUMN invocation_id TEXT;

-- Every contract violation of an invalid_message letter, bounded: {"total": n, "kept": [...]}
-- with the first 20 as "<path>: <rule>". `detail` still names the first one. NULL otherwise.
ALTER TABLE dead_letter_events ADD COLUMN violations JSONB;
