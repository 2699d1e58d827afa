/**
 * The progress watch (host/progress-watch.ts) on a hand clock and fake timers: the heartbeat is
 * written each tick until the pipeline ends, the pipeline is failed once past the fetch failure
 * bound (not before), a stall is warned on entering it and repeated, a running attempt past half
 * its budget is named once (a back-off is no attempt), a join past the rebalance timeout fails
 * the pipeline, and a stall of the process itself is logged once and restarts every bound.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Heartbeat } from '../../../host-api/heartbeat-files.js';
import { evaluateProgress, PipelineProgress } from '../../../host/progress.js';
import type { ProgressBounds } from '../../../host/progress.js';
import { watchProgress } from '../../../host/progress-watch.js';
import type { CoreLogger } from '../../../shared/logger.js';
import { ManualClock } from '../../helpers/clock.js';

const bounds: ProgressBounds = {
  fetchUnreadyAfterMs: 30_000,
  fetchFailAfterMs: 300_000,
  stallAfterMs: 60_000,
  rebalanceTimeoutMs: 315_000,
};
const TICK_MS = 1_000;

function harness(attemptBudgetMs = 60_000) {
  const clock = new ManualClock();
  const progress = new PipelineProgress({ pipeline: 'reviews', topic: 't', group: 'g', clock });
  progress.setPaused(false);
  progress.consumerStarted();
  progress.joined([0]);
  progress.fetched();
  const beat = vi.fn();
  const heartbeat = { beat } as unknown as Heartbeat;
  const warn = vi.fn();
  const info = vi.fn();
  const logger = { warn, info, error: vi.fn(), debug: vi.fn() } as unknown as CoreLogger;
  const onFailed = vi.fn();
  const stop = watchProgress({ progress, bounds, heartbeat, logger, attemptBudgetMs, onFailed, clock, tickMs: TICK_MS });
  const lines = (message: string | RegExp) =>
    warn.mock.calls.filter(([text]) => (typeof message === 'string' ? text === message : message.test(String(text))));
  /** Lets `ms` pass on the hand clock and the timers together, one tick at a time. */
  const pass = async (ms: number) => {
    for (let left = ms; left > 0; left -= TICK_MS) {
      clock.advance(Math.min(TICK_MS, left));
      await vi.advanceTimersByTimeAsync(Math.min(TICK_MS, left));
    }
  };
  return { clock, progress, beat, warn, info, onFailed, stop, pass, lines };
}

describe('the progress watch', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('writes the heartbeat at once and every tick while the pipeline runs, and no more once it stopped', async () => {
    const h = harness();
    expect(h.beat).toHaveBeenCalledTimes(1);
    await h.pass(3 * TICK_MS);
    expect(h.beat).toHaveBeenCalledTimes(4);
    h.progress.stopped();
    await h.pass(3 * TICK_MS);
    expect(h.beat).toHaveBeenCalledTimes(4);
    h.stop();
  });

  it('fails the pipeline once, past the fetch failure bound and not before', async () => {
    const h = harness();
    h.progress.crashed(new Error('broker gone'));
    h.progress.joined([0]);
    await h.pass(bounds.fetchFailAfterMs);
    expect(h.onFailed).not.toHaveBeenCalled(); // at the bound: not yet
    expect(h.warn).toHaveBeenCalledWith('pipeline not fetching', expect.objectContaining({ pipeline: 'reviews', state: 'NOT_FETCHING' }));
    await h.pass(TICK_MS);
    expect(h.onFailed).toHaveBeenCalledTimes(1);
    expect(h.onFailed.mock.calls[0]?.[0]).toMatch(
      /^no fetch completed for 301 s, 1 consumer crashes since .*\(STORAGE_FETCH_FAIL_AFTER_MS=300000\)$/,
    );
    await h.pass(5 * TICK_MS);
    expect(h.onFailed).toHaveBeenCalledTimes(1);
    h.stop();
  });

  it('warns once when an attempt outlives half its budget, naming the batch', async () => {
    const h = harness(10_000);
    h.progress.attemptStarted({ partition: 0, firstOffset: '10', lastOffset: '19' });
    await h.pass(5_000);
    const halfBudget = () => h.warn.mock.calls.filter(([message]) => message === 'batch attempt past half its budget');
    expect(halfBudget()).toHaveLength(0);
    await h.pass(TICK_MS);
    expect(halfBudget()).toHaveLength(1);
    expect(halfBudget()[0]?.[1]).toMatchObject({ pipeline: 'reviews', partition: 0, first_offset: '10', budgetMs: 10_000 });
    await h.pass(5 * TICK_MS);
    expect(halfBudget()).toHaveLength(1);
    h.stop();
  });

  it('warns only for a running attempt: not for a batch in its back-off, nor for one waiting for its redelivery', async () => {
    const h = harness(10_000);
    h.progress.attemptStarted({ partition: 0, firstOffset: '10', lastOffset: '19' });
    await h.pass(2_000);
    h.progress.notStored(0, new Error('canceling statement due to lock timeout'));
    // The back-off (the loop holds the batch) lasts longer than the whole budget.
    await h.pass(12_000);
    h.progress.awaitingRedelivery(0);
    await h.pass(3_000);
    expect(h.lines('batch attempt past half its budget')).toHaveLength(0);
    // The redelivery's attempt runs: past half the budget it is named, as attempt 2.
    h.progress.attemptStarted({ partition: 0, firstOffset: '10', lastOffset: '19' });
    await h.pass(5_000);
    expect(h.lines('batch attempt past half its budget')).toHaveLength(0);
    await h.pass(TICK_MS);
    expect(h.lines('batch attempt past half its budget')).toHaveLength(1);
    expect(h.lines('batch attempt past half its budget')[0]?.[1]).toMatchObject({ partition: 0, attempt: 2, budgetMs: 10_000 });
    h.stop();
  });

  it('fails a member whose join outlasts the rebalance timeout, once, with the line that says so', async () => {
    const h = harness();
    h.progress.joining();
    await h.pass(bounds.rebalanceTimeoutMs as number);
    expect(h.onFailed).not.toHaveBeenCalled();
    await h.pass(TICK_MS);
    expect(h.onFailed).toHaveBeenCalledTimes(1);
    expect(h.onFailed.mock.calls[0]?.[0]).toBe(
      "joining consumer group g for 316 s, longer than the rebalance timeout allows (STORAGE_MAX_POLL_INTERVAL_MS + 10 s, and kafkajs' 5 s = 315 s)",
    );
    h.stop();
  });

  it('takes a stall of the process itself (three fail bounds) as no failure: a reader sees the resume first, the line comes once, every bound restarts', async () => {
    // Prepare: a running pipeline whose last fetch was 2 s ago
    const h = harness();
    await h.pass(2_000);

    // Act: the process does not run (SIGSTOP) for three fail bounds; no timer fires meanwhile
    h.clock.advance(3 * bounds.fetchFailAfterMs);

    // Assess: a reader (/readyz, /metrics) evaluating before the watch's next tick sees no failure
    const first = evaluateProgress(h.progress.snapshot(), bounds, h.clock.monotonic());
    expect(first).toMatchObject({ state: 'RUNNING', ready: true, notFetchingMs: 0, failure: undefined });
    await h.pass(TICK_MS);
    const stalls = h.lines(/^the host itself did not run for/);
    expect(stalls).toHaveLength(1);
    expect(stalls[0]?.[0]).toBe('the host itself did not run for 900 s (stopped, suspended or paused); every bound restarts now');
    expect(stalls[0]?.[1]).toMatchObject({ stalledMs: 900_000, thresholdMs: 6_000, stallsTotal: 1 });
    expect(h.progress.stalls.totals()).toEqual({ count: 1, seconds: 900 });
    expect(h.onFailed).not.toHaveBeenCalled();
    expect(h.lines('pipeline not fetching')).toHaveLength(0);
    // The full unready bound from the resume, then the full fail bound: a host that cannot fetch still fails.
    await h.pass(bounds.fetchUnreadyAfterMs - TICK_MS);
    expect(h.lines('pipeline not fetching')).toHaveLength(0);
    await h.pass(bounds.fetchFailAfterMs - bounds.fetchUnreadyAfterMs);
    expect(h.lines('pipeline not fetching')).toHaveLength(1);
    expect(h.onFailed).not.toHaveBeenCalled();
    await h.pass(TICK_MS);
    expect(h.onFailed).toHaveBeenCalledTimes(1);
    expect(h.onFailed.mock.calls[0]?.[0]).toMatch(/^no fetch completed for 301 s \(STORAGE_FETCH_FAIL_AFTER_MS=300000\)$/);
    expect(h.lines(/^the host itself did not run for/)).toHaveLength(1);
    h.stop();
  });

  it('counts no late tick of a few seconds as a stall, and a fetch after a stall is progress as ever', async () => {
    const h = harness();
    // A tick 4.5 s late (a loaded machine, a long collection): no stall.
    h.clock.advance(4_500);
    await h.pass(TICK_MS);
    expect(h.lines(/^the host itself did not run for/)).toHaveLength(0);
    h.clock.advance(60_000);
    h.progress.fetched();
    await h.pass(TICK_MS);
    expect(h.lines(/^the host itself did not run for/)).toHaveLength(1);
    expect(h.progress.stalls.totals().count).toBe(1);
    h.stop();
  });

  it('says a stall once per process, however many pipelines watch it (their records share the stalls of their clock)', async () => {
    const h = harness();
    const other = new PipelineProgress({ pipeline: 'app-stats', topic: 'a', group: 'ga', clock: h.clock });
    const otherWarn = vi.fn();
    const otherLogger = { warn: otherWarn, info: vi.fn(), error: vi.fn(), debug: vi.fn() } as unknown as CoreLogger;
    const heartbeat = { beat: vi.fn() } as unknown as Heartbeat;
    const stopOther = watchProgress({
      progress: other,
      bounds,
      heartbeat,
      logger: otherLogger,
      attemptBudgetMs: 60_000,
      onFailed: vi.fn(),
      clock: h.clock,
      tickMs: TICK_MS,
    });
    expect(other.stalls).toBe(h.progress.stalls);
    h.clock.advance(60_000);
    await h.pass(3 * TICK_MS);
    const said = [...h.warn.mock.calls, ...otherWarn.mock.calls].filter(([message]) =>
      String(message).startsWith('the host itself did not run'),
    );
    expect(said).toHaveLength(1);
    expect(h.progress.stalls.totals().count).toBe(1);
    stopOther();
    h.stop();
  });
});
