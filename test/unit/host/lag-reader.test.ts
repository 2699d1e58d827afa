/**
 * The background lag reader (host/lag-reader.ts) on fake timers and a hand clock: one reading at
 * a time, each given up at its bound (and not before), one warning until a reading succeeds, no
 * reading once the admin is closed.
 */
import type { KafkaAdmin } from '../../../kafka/port.js';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { HostAdmin } from '../../../host/host-admin.js';
import { readLagInBackground } from '../../../host/lag-reader.js';
import type { GroupPosition } from '../../../kafka/lag.js';
import type { CoreLogger } from '../../../shared/logger.js';
import { ManualClock } from '../../helpers/clock.js';

const INTERVAL_MS = 15_000;
const TIMEOUT_MS = 10_000;

function harness() {
  let closed = false;
  const admin: HostAdmin = {
    connected: () => Promise.resolve({} as KafkaAdmin),
    closed: () => closed,
    close: () => {
      closed = true;
      return Promise.resolve();
    },
  };
  const lagRead = vi.fn();
  const warn = vi.fn();
  const logger = { warn, info: vi.fn(), error: vi.fn(), debug: vi.fn() } as unknown as CoreLogger;
  const clock = new ManualClock();
  const position = (lag: bigint) => ({ partitions: [{ partition: 0, lag }] }) as unknown as GroupPosition;
  return {
    admin,
    lagRead,
    warn,
    logger,
    clock,
    position,
    pipeline: { settings: { name: 'reviews', topic: 't', group: 'g' }, progress: { lagRead } },
  };
}

describe('the lag reader', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('reads at once and every interval, into the progress record, timed from when the reading started', async () => {
    const h = harness();
    const read = vi.fn(() => Promise.resolve(h.position(7n)));
    const stop = readLagInBackground({ ...h, pipelines: [h.pipeline], intervalMs: INTERVAL_MS, timeoutMs: TIMEOUT_MS, read });
    await vi.advanceTimersByTimeAsync(0);
    expect(h.lagRead).toHaveBeenCalledWith([{ partition: 0, lag: 7 }], h.clock.monotonic());
    await vi.advanceTimersByTimeAsync(INTERVAL_MS * 2);
    expect(read).toHaveBeenCalledTimes(3);
    stop();
    await vi.advanceTimersByTimeAsync(INTERVAL_MS * 2);
    expect(read).toHaveBeenCalledTimes(3);
    expect(h.warn).not.toHaveBeenCalled();
  });

  it('starts no second reading while one hangs, warns once at the bound and not before, and again only after a success', async () => {
    const h = harness();
    let answer: ((position: GroupPosition) => void) | undefined;
    const read = vi.fn(() => new Promise<GroupPosition>((resolve) => (answer = resolve)));
    const stop = readLagInBackground({ ...h, pipelines: [h.pipeline], intervalMs: INTERVAL_MS, timeoutMs: TIMEOUT_MS, read });

    await vi.advanceTimersByTimeAsync(TIMEOUT_MS - 1);
    expect(h.warn).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(1);
    expect(h.warn).toHaveBeenCalledTimes(1);
    expect(h.warn.mock.calls[0]?.[1]).toEqual({ error: `Error: no answer within ${TIMEOUT_MS} ms (STORAGE_LAG_TIMEOUT_MS)` });
    await vi.advanceTimersByTimeAsync(INTERVAL_MS * 3);
    expect(read).toHaveBeenCalledTimes(1);

    answer?.(h.position(3n)); // the hung reading ends late (at 55 s): the next tick (60 s) starts a new one
    await vi.advanceTimersByTimeAsync(5_000);
    expect(read).toHaveBeenCalledTimes(2);
    answer?.(h.position(2n));
    await vi.advanceTimersByTimeAsync(0);
    await vi.advanceTimersByTimeAsync(INTERVAL_MS + TIMEOUT_MS);
    expect(h.warn).toHaveBeenCalledTimes(2); // the success in between re-armed the warning
    stop();
  });

  it('warns once for failures in a row, with the error', async () => {
    const h = harness();
    const read = vi.fn(() => Promise.reject(new Error('broker gone')));
    const stop = readLagInBackground({ ...h, pipelines: [h.pipeline], intervalMs: INTERVAL_MS, timeoutMs: TIMEOUT_MS, read });
    await vi.advanceTimersByTimeAsync(INTERVAL_MS * 3);
    expect(read).toHaveBeenCalledTimes(4);
    expect(h.warn).toHaveBeenCalledTimes(1);
    expect(h.warn.mock.calls[0]?.[1]).toEqual({ error: 'Error: broker gone' });
    expect(h.lagRead).not.toHaveBeenCalled();
    stop();
  });

  it('reads nothing once the admin is closed, and drops a reading that ends after', async () => {
    const h = harness();
    let answer: ((position: GroupPosition) => void) | undefined;
    const read = vi.fn(() => new Promise<GroupPosition>((resolve) => (answer = resolve)));
    const stop = readLagInBackground({ ...h, pipelines: [h.pipeline], intervalMs: INTERVAL_MS, timeoutMs: TIMEOUT_MS, read });
    await vi.advanceTimersByTimeAsync(0);
    await h.admin.close();
    answer?.(h.position(5n));
    await vi.advanceTimersByTimeAsync(INTERVAL_MS * 2);
    expect(read).toHaveBeenCalledTimes(1);
    expect(h.lagRead).not.toHaveBeenCalled();
    stop();
  });
});
