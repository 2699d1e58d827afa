/**
 * A model-based test of the progress rules (docs/operations.md, "The rules behind the signals"):
 * random timelines of many hours drive the real progress record and its real watch on a fake
 * monotonic clock, through a small model of the world around one pipeline (a broker, its group,
 * three partitions, a database, the pause table). Events: pause, resume, joins (every one begun
 * through `joining()`, the first included, and held by the coordinator for a while), empty
 * assignment, rebalance, another member leaving, the broker dropping the member, completed
 * fetches, consumer crashes, batches started, failed and stored, lag readings (including lag on
 * partitions another member owns), stalls of the process itself (no timer fires, the monotonic
 * clock runs on: SIGSTOP, a suspended VM) and wall-clock steps both ways. Invariants:
 *   (a) a pipeline that fetches whenever it is expected to, or is paused or idle, is never
 *       NOT_FETCHING nor FAILED, and never not ready for longer than the unready bound while the
 *       world lets it fetch; while the world holds it back (its pause state not read yet, or it
 *       is between assignments) it reads STARTING or JOINING, as the rules say;
 *   (b) one that can neither fetch nor store for the fail bound is FAILED within one watch tick
 *       after it (and not a tick before the world broke plus the bound);
 * and a wall-clock step changes no verdict: every timeline runs twice, with and without them.
 */
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { watchProgress } from '../../../host/progress-watch.js';
import { evaluateProgress, PipelineProgress } from '../../../host/progress.js';
import type { PipelineState, ProgressBounds } from '../../../host/progress.js';
import { STALL_LATENESS_MS } from '../../../host/process-stalls.js';
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
  | { readonly kind: 'pause' | 'resume' | 'crash' | 'leave' | 'empty-assignment' | 'batch-fails' | 'break' | 'dropped' }
  | { readonly kind: 'stall'; readonly ms: number }
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
    { kind: 'dropped' },
  ),
  // Short stalls (counted against the bounds as any time) and long ones (up to three fail bounds).
  fc.integer({ min: 1_000, max: 3 * bounds.fetchFailAfterMs }).map((ms): Command => ({ kind: 'stall', ms })),
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
  /**
   * The longest run of ticks not ready, before any break, counting only the ticks in which the
   * world let it fetch: the world's own holds (a late first read of the pause state, a rebalance
   * or a crash until the next assignment) are not ready by the rules and follow each other (a
   * rebalance right at the start, before the pause state was read: 15 s STARTING, then 20 s
   * JOINING), so they are no part of the pipeline's unready bound.
   */
  readonly longestNotReadyMs: number;
  /** The states read while the world held it back, before any break. */
  readonly heldBackStates: ReadonlySet<PipelineState>;
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
  /** The partition a database-then-broker break put its failing batch on. */
  let failingOn: number | undefined;
  let obligedFrom: number | undefined;
  let nextCrashAt: number | undefined;
  let lastLagReadAt = -Infinity;
  /** The last moment the world saw the pipeline make progress (start, join, fetch, store, resume). */
  let lastProgressAt = 0;
  let progressBeforeFailure = 0;
  /** Set when an obligation lasted past the fail bound plus a tick without the failure. */
  let late = false;

  const states: PipelineState[] = [];
  let notReadyMs = 0;
  let longestNotReadyMs = 0;
  const heldBackStates = new Set<PipelineState>();
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
  const rebalance = (partitions: readonly number[], drop = false) => {
    if (assignment === undefined || busy() || dead()) return;
    if (drop) progress.memberDropped();
    else progress.left();
    assignment = undefined;
    // The rejoin begins at once; the coordinator holds it up to 20 s (the other members' batches).
    progress.joining();
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
        progress.joining();
        joinAt = { at: t() + rand(1, 2) * TICK_MS, partitions: PARTITIONS.filter(() => rand(0, 1) === 1) };
        return;
      case 'rebalance':
        return rebalance(command.partitions);
      case 'leave':
        return rebalance(PARTITIONS);
      case 'empty-assignment':
        return rebalance([]);
      case 'dropped':
        return rebalance(PARTITIONS, true);
      case 'stall':
        // The process does not run: the monotonic clock goes on, no timer fires. On the resume the
        // watch's overdue tick fires first; a stall past the lateness restarts what it owes.
        clock.advance(command.ms);
        vi.advanceTimersByTime(TICK_MS);
        if (command.ms > STALL_LATENESS_MS) lastProgressAt = t();
        return;
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
        const holds = pauseKnown && assignment !== undefined && assignment.length > 0 && !paused;
        if (broken !== undefined || breakPending !== undefined) return;
        const mode = timeline.broken ?? 'broker';
        if (mode === 'database-then-broker' && holds && !busy()) {
          // A batch that fails on the database; the broker goes at its failure.
          const partition = (assignment as number[])[0] as number;
          end[partition] = (end[partition] as number) + 5;
          failNext = true;
          breakPending = mode;
          failingOn = partition;
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
    // A rebalance or a crash took the partition of the failing batch before it began: it never
    // comes, so the broker goes without it.
    if (breakPending === 'database-then-broker' && !busy() && assignment !== undefined && !assignment.includes(failingOn as number)) {
      breakPending = 'broker';
      failNext = false;
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
          if (broken === 'topic-deleted') {
            progress.joining();
            joinAt = { at: t() + TICK_MS, partitions: [0] };
          }
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
    // The world keeps it from fetching this tick: its pause state is not read yet, or it is out
    // of its group (a rebalance, a crash) and not paused (a paused pipeline is ready anyway).
    const heldBack = !pauseKnown || (assignment === undefined && !paused);
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
      if (heldBack) heldBackStates.add(verdict.state);
      if (verdict.ready) notReadyMs = 0;
      else if (!heldBack) {
        notReadyMs += TICK_MS;
        longestNotReadyMs = Math.max(longestNotReadyMs, notReadyMs);
      }
    }
  };

  progress.consumerStarted();
  // The first join begins at once; the coordinator holds it up to 15 s.
  progress.joining();
  joinAt = { at: rand(0, 3) * TICK_MS, partitions: PARTITIONS.filter(() => rand(0, 1) === 1) };
  for (const { wait, command } of timeline.steps) {
    for (let tickCount = 0; tickCount < wait && failedAt === undefined; tickCount += 1) tick();
    if (failedAt !== undefined) break;
    apply(command);
  }
  // A broken world is resumed at the end (a paused pipeline owes nothing) and watched until well
  // past its bound from the moment it owes progress. The resume restarts what it owes, and only
  // the next tick folds that in: a pause as the timeline's last command left an obligation from
  // before it, which would end the watch a tick before the failure the rules promise.
  if (timeline.broken !== undefined && failedAt === undefined) {
    apply({ kind: 'resume' });
    const limit = t() + 20 * TICK_MS;
    do tick();
    while (failedAt === undefined && obligedFrom === undefined && t() < limit);
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
    heldBackStates,
    notFetchingBeforeBreak,
    endedAt: t(),
  };
}

/** Property (a) on one timeline: plays it with and without its wall-clock steps and checks the outcome. */
function expectHealthy(timeline: Timeline): Outcome {
  const outcome = play(timeline, true);
  expect(outcome.failure).toBeUndefined();
  expect(outcome.notFetchingBeforeBreak).toBe(false);
  expect(outcome.longestNotReadyMs).toBeLessThanOrEqual(bounds.fetchUnreadyAfterMs);
  // Held back by the world, it says why.
  for (const state of outcome.heldBackStates) expect(['STARTING', 'JOINING']).toContain(state);
  // The same timeline without its wall-clock steps: the same verdict at every tick.
  expect(play(timeline, false).states).toEqual(outcome.states);
  return outcome;
}

/** Property (b) on one timeline: plays it with and without its wall-clock steps and checks the outcome. */
function expectFailedInTime(timeline: Timeline): Outcome {
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
  return outcome;
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
        hours += expectHealthy(timeline).endedAt / HOUR;
      }),
      { numRuns: 40 },
    );
    // The timelines are long: hours each on average.
    expect(hours / 40).toBeGreaterThan(2);
  });

  it('(a), its counterexample: a rebalance before the pause state was read is 15 s STARTING and 20 s JOINING, never NOT_FETCHING', () => {
    // fast-check's counterexample (seed 247457849; the same shape at -1825129385 and -648081044),
    // cut to its first steps by hand: the first join at 10 s, the rebalance at 15 s just before the
    // pause state's first read, the empty assignment 20 s later (seed 11's join delay). 35 s not
    // ready in a row, all of it held back by the world: the model counted it against the bound.
    const timeline: Timeline = {
      steps: [
        { wait: 3, command: { kind: 'rebalance', partitions: [] } },
        { wait: 12, command: { kind: 'produce', partition: 0, count: 1 } },
      ],
      seed: 11,
      pauseReadAfter: 3,
      startsPaused: false,
      broken: undefined,
    };
    const outcome = expectHealthy(timeline);
    expect(outcome.states.slice(0, 8)).toEqual(['STARTING', 'STARTING', 'STARTING', 'JOINING', 'JOINING', 'JOINING', 'JOINING', 'RUNNING']);
    expect(outcome.states.slice(8).every((state) => state === 'RUNNING')).toBe(true);
    expect(outcome.longestNotReadyMs).toBe(0);
    expect([...outcome.heldBackStates].sort()).toEqual(['JOINING', 'STARTING']);
  });

  it('(b) fails within one watch tick past the fail bound once it can neither fetch nor store, and not before', () => {
    fc.assert(
      fc.property(timelineArb(true), (timeline) => {
        expectFailedInTime(timeline);
      }),
      { numRuns: 30 },
    );
  });

  it('(b), its counterexample: a pause and the resume after it, then the deleted topic fails a tick past the bound from the resume', () => {
    // fast-check's counterexample (seed -1579142116; the same shape at -136115386, 1467848712 and
    // 492623520), cut to its break and its last command by hand: the topic deleted at 5 s, a pause
    // at 20 s as the last command, the closing resume at once. The fetch clock starts again at the
    // resume, so the pipeline fails at 325 s; the model watched until 320 s only, from the
    // obligation it had before the pause.
    const timeline: Timeline = {
      steps: [
        { wait: 1, command: { kind: 'break' } },
        { wait: 3, command: { kind: 'pause' } },
      ],
      seed: 341088923,
      pauseReadAfter: 0,
      startsPaused: false,
      broken: 'topic-deleted',
    };
    const outcome = expectFailedInTime(timeline);
    expect(outcome.brokeAt).toBe(5_000);
    expect(outcome.obligedFrom).toBe(20_000);
    expect(outcome.failedAt).toBe(20_000 + bounds.fetchFailAfterMs + TICK_MS);
  });

  it('(b), its counterexample: a batch whose back-off ends after a consumer crash restarts no fetch clock', () => {
    // The product's defect behind fast-check's seed -790146006 (run 4000 times), cut to its shape
    // by hand: a batch that fails on the database starts at 10 s, the topic is deleted at 15 s,
    // the consumer crashes at 20 s as the attempt fails, the back-off ends at 25 s. Letting go of
    // the batch restarted the fetch clock although nothing was fetched: FAILED at 330 s, a tick
    // past the bound from the crash.
    const timeline: Timeline = {
      steps: [
        { wait: 2, command: { kind: 'batch-fails' } },
        { wait: 0, command: { kind: 'produce', partition: 0, count: 1 } },
        { wait: 1, command: { kind: 'break' } },
      ],
      seed: 73,
      pauseReadAfter: 0,
      startsPaused: false,
      broken: 'topic-deleted',
    };
    const outcome = expectFailedInTime(timeline);
    expect(outcome.brokeAt).toBe(15_000);
    expect(outcome.obligedFrom).toBe(20_000);
    // From the last fetch, at 10 s.
    expect(outcome.failedAt).toBe(10_000 + bounds.fetchFailAfterMs + TICK_MS);
  });

  it('(b), its counterexample: a rebalance that takes the partition of the failing batch before it began still breaks the world', () => {
    // fast-check's counterexamples (seeds 1172357815 and 1521731728) cut to their shape by hand:
    // the database break puts a failing batch on the member's partition at 10 s, and a rebalance
    // to no partitions follows at once, before the batch began. The model waited for that batch
    // to fail before the broker went, so the world never broke.
    const timeline: Timeline = {
      steps: [
        { wait: 2, command: { kind: 'break' } },
        { wait: 0, command: { kind: 'rebalance', partitions: [] } },
      ],
      seed: 12,
      pauseReadAfter: 0,
      startsPaused: false,
      broken: 'database-then-broker',
    };
    const outcome = expectFailedInTime(timeline);
    expect(outcome.brokeAt).toBe(15_000);
    expect(outcome.obligedFrom).toBe(20_000);
    expect(outcome.failedAt).toBe(20_000 + bounds.fetchFailAfterMs + TICK_MS);
  });
});
