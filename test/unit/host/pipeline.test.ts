/**
 * One host pipeline (host/pipeline.ts) on a hand clock and fake timers: its watch writes the
 * heartbeat from the start, a failure before its consumer exists fails the host, one after is the
 * consumer's, its stop goes through its phases (writing, leaving, stopped), and the end stops the
 * watch.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { PipelineFailedError } from '../../../host/pipeline-failure.js';
import { HostPipeline } from '../../../host/pipeline.js';
import type { PipelineConsumer } from '../../../host/topic-consumer.js';
import type { CoreLogger } from '../../../shared/logger.js';
import { ManualClock } from '../../helpers/clock.js';

const bounds = { fetchUnreadyAfterMs: 30_000, fetchFailAfterMs: 300_000, stallAfterMs: 60_000 };

describe('a host pipeline', () => {
  let dir: string;
  beforeEach(() => {
    // Timers only: the heartbeat's file write completes on real I/O, awaited with `written` below.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval'] });
    dir = mkdtempSync(join(tmpdir(), 'host-pipeline-'));
  });
  afterEach(() => {
    vi.useRealTimers();
    // A heartbeat write the test's last tick started may still land while the folder is removed
    // (an ordinary user's CI run: ENOTEMPTY); the removal is retried until it is gone.
    rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 20 });
  });

  const build = (onFailure: (error: Error) => void) => {
    const clock = new ManualClock();
    const logger = { warn: vi.fn(), info: vi.fn(), error: vi.fn(), debug: vi.fn() } as unknown as CoreLogger;
    const pipeline = new HostPipeline({
      settings: { name: 'reviews', topic: 'reviews-topic', group: 'g.reviews', batchSize: 500 },
      bounds,
      heartbeat: { dir, intervalMs: 5_000 },
      attemptBudgetMs: 60_000,
      logger,
      onFailure,
      clock,
    });
    return { clock, pipeline };
  };
  /**
   * Resolves once the pipeline's heartbeat file was written: real I/O, so bounded by real time
   * (10 s), not by a count of event-loop turns, which a loaded machine passes before the write lands.
   */
  const written = async (pipeline: HostPipeline) => {
    const started = performance.now();
    while (pipeline.view().snapshot.lastBeatAt === undefined && performance.now() - started < 10_000) {
      await new Promise((resolve) => setImmediate(resolve));
    }
  };
  /** Lets `ms` pass on the hand clock and the timers together, a second at a time. */
  const pass = async (clock: ManualClock, ms: number) => {
    for (let left = ms; left > 0; left -= 1_000) {
      clock.advance(1_000);
      await vi.advanceTimersByTimeAsync(1_000);
    }
  };

  it('has its heartbeat written from the start, before it has a consumer', async () => {
    const { clock, pipeline } = build(vi.fn());
    await written(pipeline);
    expect(pipeline.view().snapshot.lastBeatAt).toBe(clock.monotonic());
    expect(pipeline.view().verdict.state).toBe('STARTING');
    expect(pipeline.memberId()).toBeUndefined();
    pipeline.end(true);
  });

  it('fails the host when it fails before its consumer exists, and its consumer once it has one', async () => {
    const onFailure = vi.fn();
    const early = build(onFailure);
    early.pipeline.progress.setPaused(false);
    early.pipeline.progress.consumerStarted();
    early.pipeline.progress.joined([0]);
    await pass(early.clock, bounds.fetchFailAfterMs + 1_000);
    expect(onFailure).toHaveBeenCalledTimes(1);
    expect(onFailure.mock.calls[0]?.[0]).toBeInstanceOf(PipelineFailedError);
    early.pipeline.end(true);

    const hostFailure = vi.fn();
    const late = build(hostFailure);
    const fail = vi.fn();
    late.pipeline.consumer = { fail, memberId: () => 'member-1' } as unknown as PipelineConsumer;
    late.pipeline.progress.setPaused(false);
    late.pipeline.progress.consumerStarted();
    late.pipeline.progress.joined([0]);
    await pass(late.clock, bounds.fetchFailAfterMs + 1_000);
    expect(fail).toHaveBeenCalledTimes(1);
    expect(fail.mock.calls[0]?.[0]).toMatch(/^no fetch completed for 301 s/);
    expect(hostFailure).not.toHaveBeenCalled();
    expect(late.pipeline.memberId()).toBe('member-1');
    late.pipeline.end(true);
  });

  it('ends as STOPPED after a clean stop, and its watch writes no more', async () => {
    const { clock, pipeline } = build(vi.fn());
    await written(pipeline);
    pipeline.end(false);
    const beatAt = pipeline.view().snapshot.lastBeatAt;
    expect(beatAt).toBe(clock.monotonic());
    await pass(clock, 30_000);
    for (let turn = 0; turn < 100; turn += 1) await new Promise((resolve) => setImmediate(resolve)); // any write would have landed
    expect(pipeline.view().verdict.state).toBe('STOPPED');
    expect(pipeline.view().snapshot.lastBeatAt).toBe(beatAt);
  });
  /** A consumer whose writes (`idle`) and leave (`stop`) end when the test says. */
  const stoppableConsumer = () => {
    let endWrites!: () => void;
    let endLeave!: (error?: Error) => void;
    const idle = new Promise<void>((resolve) => (endWrites = resolve));
    const stop = vi.fn(() => new Promise<void>((resolve, reject) => (endLeave = (error) => (error ? reject(error) : resolve()))));
    const consumer = { stop, idle: () => idle } as unknown as PipelineConsumer;
    return { consumer, stop, endWrites: () => endWrites(), endLeave: (error?: Error) => endLeave(error) };
  };
  const turns = async () => {
    for (let turn = 0; turn < 10; turn += 1) await Promise.resolve();
  };

  it('stops through its phases: writing until its lanes are idle, leaving until kafkajs left, then stopped', async () => {
    const { pipeline } = build(vi.fn());
    const fake = stoppableConsumer();
    pipeline.consumer = fake.consumer;
    expect(pipeline.stopPhase).toBe('running');
    let over = false;
    const stopped = pipeline.stop().then(() => (over = true));
    expect(fake.stop).toHaveBeenCalledTimes(1);
    await turns();
    expect(pipeline.stopPhase).toBe('writing');
    fake.endWrites();
    await turns();
    expect(pipeline.stopPhase).toBe('leaving');
    expect(over).toBe(false);
    fake.endLeave();
    await stopped;
    expect(pipeline.stopPhase).toBe('stopped');
    pipeline.end(false);
  });

  it('is stopped when its leave fails, and when it never had a consumer; a leave over before the writes never reads as leaving', async () => {
    const failing = build(vi.fn());
    const fake = stoppableConsumer();
    failing.pipeline.consumer = fake.consumer;
    const stopped = failing.pipeline.stop();
    fake.endLeave(new Error('LeaveGroup refused'));
    await expect(stopped).rejects.toThrow('LeaveGroup refused');
    expect(failing.pipeline.stopPhase).toBe('stopped');
    fake.endWrites();
    await turns();
    expect(failing.pipeline.stopPhase).toBe('stopped');
    failing.pipeline.end(true);

    const bare = build(vi.fn());
    await bare.pipeline.stop();
    expect(bare.pipeline.stopPhase).toBe('stopped');
    bare.pipeline.end(true);
  });
});
