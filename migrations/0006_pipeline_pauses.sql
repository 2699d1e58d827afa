-- Pause and resume a pipeline for every host at once (docs/operations.md, "Pause, resume and
-- status"). One row per pipeline that was ever paused; no row means running. Every host reads
-- the table every few seconds (a plain SELECT: it works through a transaction-pooling pooler,
-- where LISTEN/NOTIFY would not). The Lambda functions never read it: on AWS a pipeline is
-- paused by disabling its event source mapping.
CREATE TABLE pipeline_pauses (
  pipeline TEXT PRIMARY KEY CHECK (pipeline IN ('app-stats', 'reviews', 'network-metrics')),
  paused   BOOLEAN NOT NULL,
  -- Who paused or resumed it last: OS user@host (CLI), STORAGE_ACTOR, or the HTTP caller.
  by       TEXT NOT NULL,
  at       TIMESTAMPTZ NOT NULL DEFAULT now(),
  reason   TEXT
);
