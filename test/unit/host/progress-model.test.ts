/**
 * A model-based test of the progress rules (docs/operations.md, "The rules behind the signals"):
 * random timelines of many hours drive the real progress record and its real watch on a fake
 * monotonic clock, through a small model of the world around one pipeline (a broker, its group,
 * three partitions, a database, the pause table). Events: pause, resume, join, empty assignment,
 * rebalance, another member leaving, completed fetches, consumer crashes, batches started, failed
 * and stored, lag readings (including lag on partitions another member owns) and wall-clock
 * steps both ways. Invariants:
 *   (a) a pipeline that fetches whenever it is expected to, or is paused or idle, is never
 *       NOT_FETCHING nor FAILED, and never not ready for longer than the unready bound;
 *   (b) one that can neither fetch nor store for the fail bound is FAILED within one watch tick
 *       after it (and not a tick before the world broke plus the bound);
 * and a wall-clock step changes no verdict: every timeline runs twice, with and without them.
 */
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { watchProgress } from '../../../host/progress-watch.js';
import { evaluateProgress, PipelineProgress } from '../../../host/progress.js';
import type { PipelineState, ProgressBounds } from '../../../host/progress.js';
import { ManualClock } from '../../helpers/clock.js';

const TICK_MS = 5_000;
const bounds: ProgressBounds = {
  fetchUnreadyAfterMs: 30_000,
  fetchFailAfterMs: 300_000,
  stallAfterMs: 60_000,
  rebalanceTimeoutMs: 315_000,
};
const PARTITIONS = [0, 1, 2];
const HOUR = 3_600_000;

/** How the world breaks in a broken timeline: from then on nothing the pipeline does can fetch or store. */
const BREAKS = ['broker', 'database-then-broker', 'topic-deleted', 'pause-unreadable'] as const;
type Break = (typeof BREAKS)[number];

type Command =
  | { readonly kind: 'pause' | 'resume' | 'crash' | 'leave' | 'empty-assignment' | 'batch-fails' | 'break' }
  | { readonly kind: 'rebalance'; readonly partitions: readonly number[] }
  | { readonly kind: 'produce'; readonly partition: number; readonly count: number }
  | { readonly kind: 'wall-step'; readonly ms: number };

/** A command and the ticks that pass before it. */
interface Step {
  readonly wait: number;
  readonly command: Command;
}

interface Timeline {
  readonly steps: readonly Step[];
  readonly seed: number;
  /** When the pause state is first read (ticks after the start): late reads are part of a healthy start. */
  readonly pauseReadAfter: number;
  readonly startsPaused: boolean;
  readonly broken: Break | undefined;
}

const partitionsArb = fc.subarray(PARTITIONS);
const commandArb: fc.Arbitrary<Command> = fc.oneof(
  fc.constantFrom<Command>(
    { kind: 'pause' },
    { kind: 'resume' },
    { kind: 'crash' },
    { kind: 'leave' },
    { kind: 'empty-assignment' },
    { kind: 'batch-fails' },
  ),
  partitionsArb.map((partitions): Command => ({ kind: 'rebalance', partitions })),
  fc
    .record({ partition: fc.constantFrom(...PARTITIONS), count: fc.integer({ min: 1, max: 400 }) })
    .map(({ partition, count }): Command => ({ kind: 'produce', partition, count })),
  fc.integer({ min: -48 * HOUR, max: 48 * HOUR }).map((ms): Command => ({ kind: 'wall-step', ms })),
);
// Mostly short waits, now and then hours: timelines of many hours in all.
const waitArb = fc.oneof(
  { weight: 5, arbitrary: fc.integer({ min: 0, max: 12 }) },
  { weight: 2, arbitrary: fc.integer({ min: 12, max: 240 }) },
  { weight: 1, arbitrary: fc.integer({ min: 240, max: (3 * HOUR) / TICK_MS }) },
);
const stepsArb = fc.array(fc.record({ wait: waitArb, command: commandArb }), { minLength: 10, maxLength: 60 });

function timelineArb(broken: boolean): fc.Arbitrary<Timeline> {
  return fc
    .record({
      steps: stepsArb,
      seed: fc.integer(),
      pauseReadAfter: fc.integer({ min: 0, max: 4 }),
      startsPaused: fc.boolean(),
      breakAt: fc.nat(),
      mode: fc.constantFrom(...BREAKS),
    })
    .map(({ steps, seed, pauseReadAfter, startsPaused, breakAt, mode }) => {
      if (!broken) return { steps, seed, pauseReadAfter, startsPaused, broken: undefined };
      // One break somewhere in the timeline (an unreadable pause table can only be one from the start).
      const at = mode === 'pause-unreadable' ? 0 : breakAt % (steps.length + 1);
      const withBreak = [...steps.slice(0, at), { wait: 1, command: { kind: 'break' } as Command }, ...steps.slice(at)];
      return { steps: withBreak, seed, pauseReadAfter, startsPaused, broken: mode };
    });
}

/** A small deterministic random source for the world's own timings (batch durations, join delays). */
function random(seed: number): (min: number, max: number) => number {
  let state = seed >>> 0;
  return (min, max) => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    const unit = ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
    return min + Math.floor(unit * (max - min + 1));
  };
}

interface Batch {
  readonly partition: number;
  readonly first: number;
  readonly last: number;
  phase: 'attempt' | 'back-off';
  until: number;
  fails: boolean;
}

interface Outcome {
  /** The verdict's state after every tick. */
  readonly states: PipelineState[];
  readonly failedAt: number | undefined;
  readonly failure: string | undefined;
  /** When the world broke, and from when the pipeline was obliged to make progress it could not make. */
  readonly brokeAt: number | undefined;
  readonly obligedFrom: number | undefined;
  readonly late: boolean;
  /** The world's last sight of progress before the failure. */
  readonly progressBeforeFailure: number;
  /** The longest run of ticks not ready, before any break. */
  readonly longestNotReadyMs: number;
  readonly notFetchingBeforeBreak: boolean;
  readonly endedAt: number;
}

/** Plays one timeline against the real record and watch; `wallSteps` false leaves the wall clock alone. */
function play(timeline: Timeline, wallSteps: boolean): Outcome {
  const rand = random(timeline.seed);
  const clock = new ManualClock(5_000_000);
  const progress = new PipelineProgress({ pipeline: 'reviews', topic: 'reviews', group: 'storage-consumer.reviews', clock });
  let failedAt: number | undefined;
  let failure: string | undefined;
  const silent = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined };
  const stopWatch = watchProgress({
    progress,
    bounds,
    heartbeat: { beat: () => undefined },
    logger: silent,
    attemptBudgetMs: 300_000,
    clock,
    tickMs: TICK_MS,
    onFailed: (reason) => {
      failedAt ??= clock.monotonic();
      progressBeforeFailure = lastProgressAt;
      failure ??= reason;
      progress.failed(new Error(reason));
    },
  });
  const start = clock.monotonic();
  const t = () => clock.monotonic() - start;

  // The world.
  const end = [0, 0, 0];
  const committed = [0, 0, 0];
  let assignment: number[] | undefined;
  let joinAt: { at: number; partitions: number[] } | undefined;
  let paused = false;
  let pauseKnown = false;
  let crashed = false;
  let batch: Batch | undefined;
  let waiting: { partition: number; first: number; last: number } | undefined;
  let failNext = false;
  let broken: Break | undefined;
  let brokeAt: number | undefined;
  let breakPending: Break | undefined;
  let obligedFrom: number | undefined;
  let nextCrashAt: number | undefined;
  let lastLagReadAt = -Infinity;
  /** The last moment the world saw the pipeline make progress (start, join, fetch, store, resume). */
  let lastProgressAt = 0;
  let progressBeforeFailure = 0;
  /** Set when an obligation lasted past the fail bound plus a tick without the failure. */
  let late = false;

  const states: PipelineState[] = [];
  let notReadySince: number | undefined;
  let longestNotReadyMs = 0;
  let notFetchingBeforeBreak = false;

  const busy = () => batch !== undefined;
  const dead = () => broken !== undefined && broken !== 'pause-unreadable';
  const breakNow = (mode: Break) => {
    broken = mode;
    brokeAt = t();
    if (mode !== 'pause-unreadable') nextCrashAt = t() + rand(1, 8) * TICK_MS;
  };
  const join = (partitions: readonly number[]) => {
    assignment = [...partitions];
    crashed = false;
    // A standby's join is its progress (once it may fetch at all); a join with partitions only
    // starts what it owes (a crash loop rejoins).
    if (assignment.length === 0 && pauseKnown) lastProgressAt = t();
    progress.joined(assignment);
    if (waiting !== undefined && !assignment.includes(waiting.partition)) waiting = undefined;
  };
  const rebalance = (partitions: readonly number[]) => {
    if (assignment === undefined || busy() || dead()) return;
    progress.left();
    assignment = undefined;
    joinAt = { at: t() + rand(0, 4) * TICK_MS, partitions: [...partitions] };
  };

  const apply = (command: Command) => {
    switch (command.kind) {
      case 'pause':
        if (pauseKnown && !paused) {
          paused = true;
          progress.setPaused(true);
        }
        return;
      case 'resume':
        if (pauseKnown && paused) {
          paused = false;
          lastProgressAt = t();
          progress.setPaused(false);
        }
        return;
      case 'crash':
        // Also while a batch is in flight: another partition's fetch may fail meanwhile.
        if (assignment === undefined || dead()) return;
        progress.crashed(new Error('KafkaJSConnectionError: Connection timeout'));
        crashed = true;
        assignment = undefined;
        joinAt = { at: t() + rand(1, 2) * TICK_MS, partitions: PARTITIONS.filter(() => rand(0, 1) === 1) };
        return;
      case 'rebalance':
        return rebalance(command.partitions);
      case 'leave':
        return rebalance(PARTITIONS);
      case 'empty-assignment':
        return rebalance([]);
      case 'batch-fails':
        failNext = true;
        return;
      case 'produce':
        end[command.partition] = (end[command.partition] as number) + command.count;
        return;
      case 'wall-step':
        if (wallSteps) clock.stepWall(command.ms);
        return;
      case 'break': {
        const holds = assignment !== undefined && assignment.length > 0 && !paused;
        if (broken !== undefined || breakPending !== undefined) return;
        const mode = timeline.broken ?? 'broker';
        if (mode === 'database-then-broker' && holds && !busy()) {
          // A batch that fails on the database; the broker goes at its failure.
          const partition = (assignment as number[])[0] as number;
          end[partition] = (end[partition] as number) + 5;
          failNext = true;
          breakPending = mode;
        } else if (mode === 'database-then-broker' || mode === 'broker') {
          breakPending = 'broker';
        } else breakNow(mode);
        return;
      }
    }
  };

  /** The world's own moves within one tick. */
  const world = () => {
    if (breakPending === 'broker' && !busy()) {
      breakPending = undefined;
      breakNow('broker');
    }
    if (joinAt !== undefined && joinAt.at <= t() && !dead()) {
      const partitions = joinAt.partitions;
      joinAt = undefined;
      join(partitions);
    }
    if (batch !== undefined && batch.until <= t()) {
      if (batch.phase === 'attempt' && batch.fails) {
        progress.notStored(batch.partition, new Error('canceling statement due to statement timeout'));
        if (breakPending === 'database-then-broker') {
          breakPending = undefined;
          breakNow('broker');
        }
        batch.phase = 'back-off';
        batch.until = t() + rand(0, 1) * TICK_MS;
      } else if (batch.phase === 'attempt') {
        committed[batch.partition] = batch.last + 1;
        progress.committed(batch.partition, String(batch.last + 1));
        progress.stored(batch.partition);
        lastProgressAt = t();
        batch = undefined;
      } else {
        progress.awaitingRedelivery(batch.partition);
        waiting = { partition: batch.partition, first: batch.first, last: batch.last };
        batch = undefined;
      }
    }
    if (dead()) {
      // Nothing completes; the consumer crashes now and then (the topic-deleted one rejoins each time).
      if (nextCrashAt !== undefined && nextCrashAt <= t()) {
        const silentHang = broken === 'broker' && assignment !== undefined && assignment.length > 0 && rand(0, 3) === 0;
        if (!silentHang) {
          progress.crashed(new Error('KafkaJSConnectionError: connect ECONNREFUSED'));
          crashed = true;
          assignment = undefined;
          if (broken === 'topic-deleted') joinAt = { at: t() + TICK_MS, partitions: [0] };
        }
        nextCrashAt = t() + rand(1, 8) * TICK_MS;
      }
      if (broken === 'topic-deleted' && joinAt !== undefined && joinAt.at <= t()) {
        const partitions = joinAt.partitions;
        joinAt = undefined;
        join(partitions);
      }
      return;
    }
    if (!pauseKnown && timeline.broken !== 'pause-unreadable' && t() >= timeline.pauseReadAfter * TICK_MS) {
      pauseKnown = true;
      lastProgressAt = t();
      paused = timeline.startsPaused;
      progress.setPaused(paused);
    }
    if (t() - lastLagReadAt >= 15_000) {
      lastLagReadAt = t();
      // Partitions not ours lag as far as their producers went: another member stores nothing of them.
      progress.lagRead(PARTITIONS.map((partition) => ({ partition, lag: (end[partition] as number) - (committed[partition] as number) })));
    }
    const fetching = assignment !== undefined && assignment.length > 0 && !paused && pauseKnown && !busy() && !crashed;
    if (!fetching) return;
    progress.fetched();
    lastProgressAt = t();
    const owned = assignment as number[];
    const next =
      waiting ??
      owned
        .map((partition) => ({ partition, first: committed[partition] as number }))
        .find(({ partition, first }) => (end[partition] as number) > first);
    if (next === undefined) return;
    const first = next.first;
    const last = Math.min(end[next.partition] as number, first + 500) - 1;
    waiting = undefined;
    progress.attemptStarted({
      partition: next.partition,
      firstOffset: String(first),
      lastOffset: String(last),
      highWatermark: String(end[next.partition]),
    });
    batch = { partition: next.partition, first, last, phase: 'attempt', until: t() + rand(0, 2) * TICK_MS, fails: failNext };
    failNext = false;
  };

  /** The pipeline's obligation as the world sees it: it should make progress now and cannot. */
  const obliged = () => {
    if (broken === 'pause-unreadable') return true;
    if (!dead() || paused) return false;
    // A member between assignments is obliged once it crashed (its join cannot complete).
    return crashed || (assignment !== undefined && assignment.length > 0 && !busy());
  };

  const tick = () => {
    world();
    // The current period in which it owes progress (a pause, say, ends one).
    if (!obliged()) obligedFrom = undefined;
    else obligedFrom = Math.max(obligedFrom ?? t(), lastProgressAt);
    clock.advance(TICK_MS);
    vi.advanceTimersByTime(TICK_MS);
    if (obligedFrom !== undefined && failedAt === undefined && t() > obligedFrom + bounds.fetchFailAfterMs + TICK_MS) late = true;
    const verdict = evaluateProgress(progress.snapshot(), bounds, clock.monotonic());
    states.push(verdict.state);
    if (brokeAt === undefined && breakPending === undefined) {
      if (verdict.state === 'NOT_FETCHING') notFetchingBeforeBreak = true;
      if (verdict.ready) notReadySince = undefined;
      else {
        notReadySince ??= t() - TICK_MS;
        longestNotReadyMs = Math.max(longestNotReadyMs, t() - notReadySince);
      }
    }
  };

  progress.consumerStarted();
  joinAt = { at: rand(0, 3) * TICK_MS, partitions: PARTITIONS.filter(() => rand(0, 1) === 1) };
  for (const { wait, command } of timeline.steps) {
    for (let tickCount = 0; tickCount < wait && failedAt === undefined; tickCount += 1) tick();
    if (failedAt !== undefined) break;
    apply(command);
  }
  // A broken world is resumed at the end (a paused pipeline owes nothing) and watched until well
  // past its bound from the moment it owes progress.
  if (timeline.broken !== undefined && failedAt === undefined) {
    apply({ kind: 'resume' });
    const limit = t() + 20 * TICK_MS;
    while (failedAt === undefined && obligedFrom === undefined && t() < limit) tick();
    const until = (obligedFrom ?? t()) + bounds.fetchFailAfterMs + 3 * TICK_MS;
    while (failedAt === undefined && t() < until) tick();
  }
  stopWatch();
  return {
    states,
    failedAt: failedAt === undefined ? undefined : failedAt - start,
    failure,
    brokeAt,
    obligedFrom,
    late,
    progressBeforeFailure,
    longestNotReadyMs,
    notFetchingBeforeBreak,
    endedAt: t(),
  };
}

describe('the progress rules, model-based (many hours of random timelines, fake monotonic clock)', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('(a) never fails, never reads NOT_FETCHING, and is never not ready past the unready bound when the world lets it fetch', () => {
    let hours = 0;
    fc.assert(
      fc.property(timelineArb(false), (timeline) => {
        const outcome = play(timeline, true);
        hours += outcome.endedAt / HOUR;
        expect(outcome.failure).toBeUndefined();
        expect(outcome.notFetchingBeforeBreak).toBe(false);
        expect(outcome.longestNotReadyMs).toBeLessThanOrEqual(bounds.fetchUnreadyAfterMs);
        // The same timeline without its wall-clock steps: the same verdict at every tick.
        expect(play(timeline, false).states).toEqual(outcome.states);
      }),
      { numRuns: 40 },
    );
    // The timelines are long: hours each on average.
    expect(hours / 40).toBeGreaterThan(2);
  });

  it('(b) fails within one watch tick past the fail bound once it can neither fetch nor store, and not before', () => {
    fc.assert(
      fc.property(timelineArb(true), (timeline) => {
        const outcome = play(timeline, true);
        expect(outcome.brokeAt).toBeDefined();
        expect(outcome.late).toBe(false);
        expect(outcome.failedAt).toBeDefined();
        const failedAt = outcome.failedAt as number;
        expect(failedAt).toBeLessThanOrEqual((outcome.obligedFrom as number) + bounds.fetchFailAfterMs + TICK_MS);
        // Never sooner than the bound after the last progress the world saw.
        expect(failedAt).toBeGreaterThanOrEqual(outcome.progressBeforeFailure + bounds.fetchFailAfterMs - TICK_MS);
        expect(outcome.notFetchingBeforeBreak).toBe(false);
        expect(play(timeline, false).states).toEqual(outcome.states);
      }),
      { numRuns: 30 },
    );
  });
});
