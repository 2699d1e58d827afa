-- Audit before acting (docs/operations.md, "The audit trail"). An action whose change is not
-- made in this database's transaction (a replay moves offsets in Kafka) writes its entry first,
-- 'started', with its plan, and completes it after with what happened: 'completed', or 'failed'
-- when the change did not happen or happened only in part (the outcome says which part). An
-- entry left 'started' is an action whose end was never recorded: the process died, or the
-- database went away, between the change and the completion. Entries written in the action's
-- own transaction (dlq purge, dlq redrive, pause, resume) are 'completed' when they commit.
ALTER TABLE operator_actions
  ADD COLUMN state TEXT NOT NULL DEFAULT 'completed' CHECK (state IN ('started', 'completed', 'failed')),
  -- When the entry took its final state; the entries before this migration were written complete.
  ADD COLUMN completed_at TIMESTAMPTZ;

UPDATE operator_actions SET completed_at = time;
