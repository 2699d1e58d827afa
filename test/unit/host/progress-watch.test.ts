/**
 * The progress watch (host/progress-watch.ts) on a hand clock and fake timers: the heartbeat is
 * written each tick until the pipeline ends, the pipeline is failed once past the fetch failure
 * bound (not before), a stall is warned on entering it and repeated, and an attempt past half its
 * budget is named once.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Heartbeat } from '../../../host-api/heartbeat-files.js';
import { PipelineProgress } from '../../../host/progress.js';
import { watchProgress } from '../../../host/progress-watch.js';
import type { CoreLogger } from '../../../shared/logger.js';
import { ManualClock } from '../../helpers/clock.js';

const bounds = { fetchUnreadyAfterMs: 30_000, fetchFailAfterMs: 300_000, stallAfterMs: 60_000 };
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
  /** Lets `ms` pass on the hand clock and the timers together, one tick at a time. */
  const pass = async (ms: number) => {
    for (let left = ms; left > 0; left -= TICK_MS) {
      clock.advance(Math.min(TICK_MS, left));
      await vi.advanceTimersByTimeAsync(Math.min(TICK_MS, left));
    }
  };
  return { clock, progress, beat, warn, info, onFailed, stop, pass };
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
});
