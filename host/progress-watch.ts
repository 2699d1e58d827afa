/**
 * The once-a-second watch over one pipeline's progress record (./progress.ts): it turns the
 * record's verdict into the heartbeat file, the WARN lines (`pipeline not fetching`, `pipeline
 * stalled`, a long attempt, a stall of the process itself) and the failure past a bound. The
 * rules themselves live in ./progress.ts; docs/operations.md, "The rules behind the signals",
 * states them.
 */
import type { CoreLogger } from '../shared/logger.js';
import type { Clock } from './clock.js';
import { systemClock } from './clock.js';
import type { Heartbeat } from '../host-api/heartbeat-files.js';
import type { InFlightBatch, PipelineProgress, PipelineState, ProgressBounds } from './progress.js';
import { batchFields } from '../shared/batch-report.js';
import { describeBatch, evaluateProgress } from './progress.js';
import { STALL_LATENESS_MS } from './process-stalls.js';

/** How often a watch looks at its record. */
const TICK_MS = 1_000;

/** A stalled pipeline says so at least this often. */
const STALL_WARN_INTERVAL_MS = 60_000;

/** The states in which a pipeline still writes its heartbeat file: all but the end. */
const ENDED: ReadonlySet<PipelineState> = new Set(['FAILED', 'STOPPED']);

/** States worth a WARN on entering them (and an INFO on leaving them for RUNNING). */
const TROUBLED: ReadonlySet<PipelineState> = new Set(['NOT_FETCHING', 'STALLED']);

/** What a watch is built from. */
export interface ProgressWatchOptions {
  readonly progress: PipelineProgress;
  readonly bounds: ProgressBounds;
  readonly heartbeat: Heartbeat;
  readonly logger: CoreLogger;
  /** The deadline of one attempt (an invocation); past half of it, a WARN names the batch. */
  readonly attemptBudgetMs: number;
  /** Called (once) when the rules say the pipeline has failed: no fetch for the failure bound. */
  readonly onFailed: (reason: string) => void;
  /** The record's clock: every age here is measured on its monotonic side. */
  readonly clock?: Clock;
  readonly tickMs?: number;
}

const batchLog = (batch: InFlightBatch, now: number) => ({
  ...batchFields(batch),
  attempt: batch.attempt,
  retries: batch.retries,
  batchAgeMs: now - batch.startedAt,
  attemptAgeMs: now - batch.attemptStartedAt,
  lastError: batch.lastError?.message,
});

/**
 * Applies the rules of host/progress.ts to one pipeline, once a second, from the start of the
 * host to its end: writes the heartbeat file while the pipeline has not ended (so the file goes
 * stale exactly when the pipeline failed or stopped, or the process no longer turns), fails the
 * pipeline past the fetch failure bound (or the join's), logs a WARN on entering NOT_FETCHING or
 * STALLED and repeats it for a stall at least once a minute, and warns once per running attempt
 * that outlives half its budget. It also watches the process itself (host/process-stalls.ts): a
 * tick far later than due means the process did not run; the first watch to see that logs it
 * once, and the record restarts every bound from the resume. Returns the function that stops
 * the watch.
 */
export function watchProgress(options: ProgressWatchOptions): () => void {
  const { progress, bounds, heartbeat, logger, attemptBudgetMs } = options;
  const clock = options.clock ?? systemClock;
  const now = () => clock.monotonic();
  const tickMs = options.tickMs ?? TICK_MS;
  const stalls = progress.stalls;
  let previous: PipelineState | undefined;
  let lastStallWarnAt = -Infinity;
  let failed = false;
  const warnedAttempts = new Set<string>();

  const tick = () => {
    const at = now();
    stalls.observe(at);
    for (const stall of stalls.takeUnreported()) {
      logger.warn(
        `the host itself did not run for ${Math.round(stall.ms / 1000)} s (stopped, suspended or paused); every bound restarts now`,
        {
          stalledMs: Math.round(stall.ms),
          thresholdMs: tickMs + STALL_LATENESS_MS,
          stallsTotal: stalls.totals().count,
        },
      );
    }
    const snapshot = progress.snapshot();
    const verdict = evaluateProgress(snapshot, bounds, at);
    if (!ENDED.has(verdict.state)) heartbeat.beat();
    const name = progress.pipeline;
    if (verdict.failure !== undefined && !failed && snapshot.ended === undefined) {
      failed = true;
      options.onFailed(verdict.failure);
    }
    if (verdict.state !== previous) {
      if (TROUBLED.has(verdict.state)) {
        logger.warn(verdict.state === 'STALLED' ? 'pipeline stalled' : 'pipeline not fetching', {
          pipeline: name,
          state: verdict.state,
          causes: verdict.causes,
          crashesSinceFetch: snapshot.crashesSinceFetch,
          lastError: snapshot.lastError?.message,
          ...(verdict.oldestInFlight ? batchLog(verdict.oldestInFlight, at) : {}),
        });
        if (verdict.state === 'STALLED') lastStallWarnAt = at;
      } else if (verdict.state === 'RUNNING' && previous !== undefined && TROUBLED.has(previous)) {
        logger.info('pipeline recovered', { pipeline: name, state: verdict.state, was: previous });
      }
      previous = verdict.state;
    } else if (verdict.state === 'STALLED' && at - lastStallWarnAt >= Math.min(STALL_WARN_INTERVAL_MS, bounds.stallAfterMs)) {
      lastStallWarnAt = at;
      logger.warn('pipeline stalled', {
        pipeline: name,
        state: verdict.state,
        causes: verdict.causes,
        ...(verdict.oldestInFlight ? batchLog(verdict.oldestInFlight, at) : {}),
      });
    }
    // Only a running attempt: a batch in its back-off, or waiting for its redelivery, runs nothing.
    for (const batch of snapshot.inFlight) {
      const key = `${batch.partition}:${batch.firstOffset}:${batch.attempt}`;
      if (batch.attempting && at - batch.attemptStartedAt > attemptBudgetMs / 2 && !warnedAttempts.has(key)) {
        warnedAttempts.add(key);
        logger.warn('batch attempt past half its budget', {
          pipeline: name,
          ...batchLog(batch, at),
          budgetMs: attemptBudgetMs,
          batch: describeBatch(batch, at),
        });
      }
    }
    if (warnedAttempts.size > 1_000) warnedAttempts.clear();
  };
  const unwatchStalls = stalls.watch(tickMs);
  tick();
  const timer = setInterval(tick, tickMs);
  timer.unref();
  return () => {
    clearInterval(timer);
    unwatchStalls();
  };
}
