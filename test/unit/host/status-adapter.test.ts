/**
 * The status API adapter (host/status-adapter.ts) over hand-built pipelines: the summaries, a
 * status whose broker view is bounded (fake timers: given up at 5 s, not before), the progress
 * read after the broker answered, and control before and after the pause control exists.
 */
import type { KafkaAdmin } from '../../../kafka/port.js';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { HostAdmin } from '../../../host/host-admin.js';
import type { PauseControl } from '../../../host/pause-control.js';
import { evaluateProgress, PipelineProgress } from '../../../host/progress.js';
import { createPipelinesApi } from '../../../host/status-adapter.js';
import type { StatusPipeline, StatusSource } from '../../../host/status-adapter.js';
import type { GroupPosition } from '../../../kafka/lag.js';
import type { PipelineName } from '../../../shared/pipelines.js';
import { ManualClock } from '../../helpers/clock.js';

const bounds = { fetchUnreadyAfterMs: 30_000, fetchFailAfterMs: 300_000, stallAfterMs: 60_000 };
const admin: HostAdmin = { connected: () => Promise.resolve({} as KafkaAdmin), closed: () => false, close: () => Promise.resolve() };

function pipeline(clock: ManualClock, name: PipelineName): StatusPipeline & { progress: PipelineProgress } {
  const progress = new PipelineProgress({ pipeline: name, topic: `${name}-topic`, group: `g.${name}`, clock });
  return {
    progress,
    settings: { name, topic: `${name}-topic`, group: `g.${name}` },
    view: () => {
      const snapshot = progress.snapshot();
      return { snapshot, verdict: evaluateProgress(snapshot, bounds, clock.monotonic()) };
    },
    memberId: () => 'member-1',
  };
}

function source(overrides: Partial<StatusSource> = {}) {
  const clock = new ManualClock();
  const reviews = pipeline(clock, 'reviews');
  const appStats = pipeline(clock, 'app-stats');
  const pipelines = new Map<PipelineName, StatusPipeline>([
    ['reviews', reviews],
    ['app-stats', appStats],
  ]);
  return {
    reviews,
    appStats,
    source: { pipelines, hostId: 'box:42', admin, pauseControl: () => undefined, state: () => 'Starting', ...overrides },
  };
}

describe('the status adapter', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('lists every pipeline with its state and pause, in the host order', () => {
    const { reviews, source: s } = source();
    reviews.progress.setPaused(true);
    const api = createPipelinesApi(s);
    expect(api.pipelines).toEqual(['reviews', 'app-stats']);
    expect(api.summaries()).toEqual([
      { pipeline: 'reviews', state: 'PAUSED', paused: true },
      { pipeline: 'app-stats', state: 'STARTING', paused: false },
    ]);
  });

  it('gives the broker up after 5 s (not before) and still answers, from the record as it is then', async () => {
    const { reviews, source: s } = source({ read: () => new Promise<GroupPosition>(() => undefined) });
    const api = createPipelinesApi(s);
    let settled = false;
    const status = api.status('reviews').finally(() => (settled = true));
    await vi.advanceTimersByTimeAsync(4_999);
    expect(settled).toBe(false);
    reviews.progress.setPaused(true); // after the broker was asked: the answer shows it
    await vi.advanceTimersByTimeAsync(1);
    expect(await status).toMatchObject({
      pipeline: 'reviews',
      host_id: 'box:42',
      member_id: 'member-1',
      group: 'g.reviews',
      state: 'PAUSED',
      pause_read_error: 'not read yet',
      kafka_error: 'the broker did not answer within 5000 ms',
    });
  });

  it("names the broker's error in the status", async () => {
    const { source: s } = source({ read: () => Promise.reject(new Error('There is no leader for this topic-partition')) });
    expect(await createPipelinesApi(s).status('app-stats')).toMatchObject({
      pipeline: 'app-stats',
      kafka_error: 'There is no leader for this topic-partition',
    });
  });

  it('refuses control before the pause control exists, naming the state; then writes through it, via http, naming the host, the audit required', async () => {
    const change = vi.fn(() => Promise.resolve({ pause: { paused: true }, previous: undefined }));
    const host: { control?: PauseControl } = {};
    const { source: s } = source({ pauseControl: () => host.control });
    const api = createPipelinesApi(s);
    await expect(api.control('reviews', true, 'http:1.2.3.4', 'load test')).rejects.toThrow('the host is Starting');
    host.control = { change } as unknown as PauseControl;
    await api.control('reviews', true, 'http:1.2.3.4', 'load test');
    expect(change).toHaveBeenCalledWith({
      pipeline: 'reviews',
      paused: true,
      by: 'http:1.2.3.4',
      reason: 'load test',
      via: 'http',
      details: { host: 'box:42' },
      audit: 'required',
    });
  });
});
