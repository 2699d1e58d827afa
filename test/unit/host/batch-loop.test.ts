import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { BatchPlace, BatchPort } from '../../../host/batch-loop.js';
import { createBatchLoop } from '../../../host/batch-loop.js';
import type { HostEvent } from '../../../host/event-cut.js';
import { cutBatch } from '../../../host/event-cut.js';
import type { CommitRequest } from '../../../host/offset-commits.js';
import { COMMIT_RETRY_BASE_MS, MAX_COMMIT_FAILURES } from '../../../host/offset-commits.js';
import type { InvocationResult, Invoker } from '../../../host/invoker.js';
import { PipelineProgress } from '../../../host/progress.js';
import { Membership } from '../../../host/membership.js';
import { loadHostSettings } from '../../../config/host-settings.js';
import type { SourceRecord } from '../../../shared/kafka-event-builder.js';

// The batch loop driven through its port: plain objects in the shape of kafkajs' eachBatch
// payload, no kafkajs consumer, fake or real.

const settings = loadHostSettings({
  KAFKA_BROKERS: '127.0.0.1:9092',
  STORAGE_MAX_POLL_RECORDS_REVIEWS: '2',
  STORAGE_INVOKE_RETRY_BASE_MS: '1',
  STORAGE_HEARTBEAT_DIR: '/nonexistent',
});

const ok: InvocationResult = { kind: 'response', payload: { batchItemFailures: [] } };
const transient: InvocationResult = { kind: 'error', error: new Error('connection reset'), fatal: false };

function message(offset: number): SourceRecord {
  return { topic: 'reviews', partition: 1, key: null, value: Buffer.from('{}'), timestamp: '0', offset: String(offset), headers: [] };
}

/** A port over `offsets` of partition 1; the partition ends at `end` (default: right after the batch). */
function port(offsets: readonly number[], options: { end?: number; stale?: () => boolean; commit?: () => Promise<void> } = {}) {
  const resolved: string[] = [];
  const commits: string[] = [];
  const value: BatchPort = {
    batch: {
      topic: 'reviews',
      partition: 1,
      highWatermark: String(options.end ?? (offsets.at(-1) ?? 0) + 1),
      records: offsets.map(message),
      firstOffset: () => (offsets.length > 0 ? String(offsets[0]) : null),
      lastOffset: () => String(offsets.at(-1)),
    },
    isRunning: () => true,
    isStale: options.stale ?? (() => false),
    heartbeat: async () => undefined,
    resolveOffset: (offset) => resolved.push(offset),
    commitOffsetsIfNecessary: async (request: CommitRequest) => {
      await options.commit?.();
      for (const topic of request.topics) for (const { partition, offset } of topic.partitions) commits.push(`${partition}@${offset}`);
    },
  };
  return { port: value, resolved, commits };
}

function loop(answer: (call: number) => InvocationResult) {
  const invocations: number[][] = [];
  const seeks: string[] = [];
  const failures: Array<{ message: string; place: BatchPlace }> = [];
  const invoker: Invoker = {
    invoke: async (event) => {
      invocations.push(
        Object.values(event.records)
          .flat()
          .map((record) => record.offset),
      );
      return answer(invocations.length - 1);
    },
    close: async () => undefined,
  };
  const silent = () => undefined;
  const progress = new PipelineProgress({ pipeline: 'reviews', topic: 'reviews', group: 'storage-consumer.reviews' });
  const membership = new Membership();
  membership.joining();
  membership.assigned([0, 1, 2]);
  const batchLoop = createBatchLoop({
    pipeline: settings.storage.pipelines.reviews,
    settings,
    invoker,
    logger: { debug: silent, info: silent, warn: silent, error: silent },
    progress,
    heartbeatIntervalMs: 1_000,
    halted: () => failures.length > 0,
    fail: (text, _cause, place) => failures.push({ message: text, place }),
    seek: (topic, partition, offset) => seeks.push(`${topic}-${partition}@${offset}`),
    concurrency: 3,
    membership,
  });
  /** One polled batch, handed over and written to the end. */
  const deliver = async (polled: BatchPort) => {
    await batchLoop.eachBatch(polled);
    await batchLoop.idle();
  };
  return { batchLoop, deliver, invocations, seeks, failures, progress, membership };
}

describe('batch loop (through its port)', () => {
  it('commits each event of a batch in offset order, one at a time, after its invocation', async () => {
    // Prepare
    const { deliver, invocations } = loop(() => ok);
    const polled = port([10, 11, 12, 13]);

    // Act
    await deliver(polled.port);

    // Assess
    expect(invocations).toEqual([
      [10, 11],
      [12, 13],
    ]);
    expect(polled.resolved).toEqual(['13']);
    expect(polled.commits).toEqual(['1@12', '1@14']);
  });

  it('lets go of an event once it was invoked, also when it is redelivered; the events after it keep theirs', async () => {
    // Prepare
    const { batchLoop } = loop((call) => (call === 0 ? ok : transient));
    const polled = port([10, 11, 12, 13, 14, 15]);
    const [first, second, third] = cutBatch(
      { topic: 'reviews', partition: 1, records: polled.port.batch.records, lastOffset: '15' },
      { batchSize: 2, maxEventBytes: settings.maxEventBytes },
    );
    const built = second?.event;

    // Act
    const stored = await batchLoop.step(first as HostEvent, polled.port);
    const redelivered = await batchLoop.step(second as HostEvent, polled.port);

    // Assess
    expect([stored, redelivered]).toEqual(['next', 'rewound']);
    expect(built?.records['reviews-1']?.map((record) => record.offset)).toEqual([12, 13]);
    expect(() => first?.event).toThrow('the event of reviews-1 at offset 10 was released after its invocation');
    expect(() => second?.event).toThrow('the event of reviews-1 at offset 12 was released after its invocation');
    expect(Object.values(third?.event.records ?? {}).flat()).toHaveLength(2);
  });

  it('leaves a short last event for the next fetch when the partition holds more, so events carry the full batch size', async () => {
    // Prepare: offsets 10..14 fetched, the partition ends at 20
    const { deliver, invocations } = loop(() => ok);
    const polled = port([10, 11, 12, 13, 14], { end: 20 });

    // Act
    await deliver(polled.port);

    // Assess: 14 is neither invoked nor resolved: the next fetch starts with it
    expect(invocations).toEqual([
      [10, 11],
      [12, 13],
    ]);
    expect(polled.commits).toEqual(['1@12', '1@14']);
    expect(polled.resolved.at(-1)).toBe('13');
  });

  it('sends a short last event at the end of the partition, and a batch whose only event is short', async () => {
    // Prepare
    const { deliver, invocations } = loop(() => ok);

    // Act
    await deliver(port([10, 11, 12]).port);
    await deliver(port([13], { end: 100 }).port);

    // Assess
    expect(invocations).toEqual([[10, 11], [12], [13]]);
  });

  it('steps one event: a transient error backs off, commits nothing and seeks to the event; the exponent grows per partition', async () => {
    // Prepare
    const { batchLoop, deliver, invocations, seeks, progress } = loop(() => transient);
    const polled = port([3, 4, 5]);

    // Act
    await deliver(polled.port);
    await deliver(port([3, 4, 5]).port);

    // Assess
    expect(invocations).toEqual([
      [3, 4],
      [3, 4],
    ]);
    expect(polled.commits).toEqual([]);
    expect(seeks).toEqual(['reviews-1@3', 'reviews-1@3']);
    expect(batchLoop.state.redeliveriesInRow.get(1)).toBe(2);
    expect(progress.snapshot().inFlight).toMatchObject([{ firstOffset: '3', attempt: 2, busy: false }]);
  });

  it('a heartbeat that says the group rebalances leaves the rest to the next owner without a seek: no position outlives the generation', async () => {
    // Prepare: the first event is stored, then the heartbeat answers REBALANCE_IN_PROGRESS
    const { deliver, invocations, seeks, membership } = loop(() => ok);
    const polled = port([0, 1, 2, 3], { end: 4 });
    const rebalancing = Object.assign(new Error('The group is rebalancing'), { type: 'REBALANCE_IN_PROGRESS' });
    polled.port.heartbeat = async () => {
      throw rebalancing;
    };

    // Act
    await deliver(polled.port);

    // Assess: the stored event is committed; the rest is neither invoked nor sought back
    expect(invocations).toEqual([[0, 1]]);
    expect(polled.commits).toEqual(['1@2']);
    expect(seeks).toEqual([]);
    expect(membership.state).toBe('revoking');
    expect(membership.owns(1)).toBe(false);
  });

  it('a heartbeat that fails for another reason (a broken connection) keeps the partition and seeks the rest back', async () => {
    // Prepare
    const { deliver, invocations, seeks, membership } = loop(() => ok);
    const polled = port([0, 1, 2, 3], { end: 4 });
    polled.port.heartbeat = async () => {
      throw new Error('Connection error: read ECONNRESET');
    };

    // Act
    await deliver(polled.port);

    // Assess
    expect(invocations).toEqual([[0, 1]]);
    expect(seeks).toEqual(['reviews-1@2']);
    expect(membership.owns(1)).toBe(true);
  });

  it('a redelivery back-off ends at once on a stop and seeks nothing: the next owner starts from the committed offset', async () => {
    // Prepare: a transient error with a one-minute back-off
    const { batchLoop, invocations, seeks, membership, progress } = loop(() => transient);
    batchLoop.state.redeliveriesInRow.set(1, 20);
    const polled = port([3, 4]);

    // Act: the stop comes 50 ms into the back-off
    const began = performance.now();
    await batchLoop.eachBatch(polled.port);
    await new Promise((resolve) => setTimeout(resolve, 50));
    membership.leaving();
    await batchLoop.idle();
    const tookMs = performance.now() - began;

    // Assess
    expect(invocations).toEqual([[3, 4]]);
    expect(tookMs).toBeLessThan(5_000);
    expect(seeks).toEqual([]);
    expect(progress.snapshot().inFlight).toEqual([]);
  });

  it('a redelivery back-off ends on a revoke (the broker dropped the member) without a seek', async () => {
    // Prepare
    const { batchLoop, seeks, membership } = loop(() => transient);
    batchLoop.state.redeliveriesInRow.set(1, 20);

    // Act
    await batchLoop.eachBatch(port([3, 4]).port);
    await new Promise((resolve) => setTimeout(resolve, 50));
    membership.revoke('dropped');
    await batchLoop.idle();

    // Assess
    expect(seeks).toEqual([]);
    expect(membership.state).toBe('revoking');
  });

  it('a stored event resets the redelivery exponent of its partition', async () => {
    // Prepare: the first invocation fails, the redelivery succeeds
    const { batchLoop, deliver } = loop((call) => (call === 0 ? transient : ok));

    // Act
    await deliver(port([3, 4]).port);
    await deliver(port([3, 4]).port);

    // Assess
    expect(batchLoop.state.redeliveriesInRow.has(1)).toBe(false);
  });

  it('drops an event whose partition went stale during its invocation: nothing committed, nothing more invoked', async () => {
    // Prepare
    let stale = false;
    const { deliver, invocations } = loop(() => {
      stale = true;
      return ok;
    });
    const polled = port([1, 2, 3, 4], { stale: () => stale });

    // Act
    await deliver(polled.port);

    // Assess
    expect(invocations).toEqual([[1, 2]]);
    expect(polled.commits).toEqual([]);
  });

  describe('a failed commit', () => {
    beforeEach(() => {
      // The back-off's jitter draw that gives each wait its ceiling (1 s, 2 s ...), so the schedule reads exactly.
      vi.spyOn(Math, 'random').mockReturnValue(0);
    });
    afterEach(() => {
      vi.useRealTimers();
      vi.restoreAllMocks();
    });
    /** A commit that fails its first `failures` calls (the coordinator moved), then succeeds. */
    const failingFirst = (failures: number) => {
      let calls = 0;
      return {
        commit: async () =>
          ++calls <= failures ? Promise.reject(new Error('This is not the correct coordinator for this group')) : undefined,
      };
    };

    it('is retried when its partition receives nothing more: after 1 s, then 2 s, until it is committed', async () => {
      // Prepare
      vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
      const { batchLoop, deliver, progress } = loop(() => ok);
      const polled = port([10], failingFirst(2));

      // Act: the event's own commit and the first retry fail
      await deliver(polled.port);
      const afterFailure = { commits: [...polled.commits], pending: batchLoop.state.commits.pending.size };
      await vi.advanceTimersByTimeAsync(COMMIT_RETRY_BASE_MS);
      const afterFirstRetry = [...polled.commits];
      await vi.advanceTimersByTimeAsync(2 * COMMIT_RETRY_BASE_MS - 1);
      const beforeSecondRetry = [...polled.commits];
      await vi.advanceTimersByTimeAsync(1);

      // Assess
      expect(afterFailure).toEqual({ commits: [], pending: 1 });
      expect(afterFirstRetry).toEqual([]);
      expect(beforeSecondRetry).toEqual([]);
      expect(polled.commits).toEqual(['1@11']);
      expect(batchLoop.state.commits.pending.size).toBe(0);
      expect(batchLoop.state.commits.failuresInRow).toBe(0);
      expect(progress.snapshot().partitions.find((partition) => partition.partition === 1)?.committed).toBe('11');
      await vi.advanceTimersByTimeAsync(60_000);
      expect(polled.commits).toEqual(['1@11']);
    });

    it('is not retried once a later commit of its partition was asked for: a commit never moves back', async () => {
      // Prepare
      vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
      const { batchLoop, deliver } = loop(() => ok);
      const failed = port([10], failingFirst(1_000));
      const later = port([11]);

      // Act
      await deliver(failed.port);
      await deliver(later.port);
      await vi.advanceTimersByTimeAsync(60_000);

      // Assess
      expect(failed.commits).toEqual([]);
      expect(later.commits).toEqual(['1@12']);
      expect(batchLoop.state.commits.pending.size).toBe(0);
    });

    it('is dropped by a join or a leave: the next generation starts from the committed offsets', async () => {
      // Prepare
      vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
      const { batchLoop, deliver } = loop(() => ok);
      const polled = port([10], failingFirst(1));

      // Act
      await deliver(polled.port);
      const pending = batchLoop.state.commits.pending.size;
      await batchLoop.whileDrained(async () => undefined);
      await vi.advanceTimersByTimeAsync(60_000);

      // Assess
      expect(pending).toBe(1);
      expect(batchLoop.state.commits.pending.size).toBe(0);
      expect(polled.commits).toEqual([]);
    });

    it('after a join, is retried again although the old generation had asked for a later offset', async () => {
      // Prepare: the old generation asked for 1@13; the new one redelivers from 11
      vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
      const { batchLoop, deliver } = loop(() => ok);
      await deliver(port([12]).port);
      await batchLoop.whileDrained(async () => undefined);
      const redelivered = port([10], failingFirst(1));

      // Act
      await deliver(redelivered.port);
      await vi.advanceTimersByTimeAsync(COMMIT_RETRY_BASE_MS);

      // Assess
      expect(redelivered.commits).toEqual(['1@11']);
    });
  });

  it('fails the pipeline after MAX_COMMIT_FAILURES failed commits in a row, not before', async () => {
    // Prepare
    const { batchLoop, deliver, failures } = loop(() => ok);
    const failing = { commit: async () => Promise.reject(new Error('coordinator moved')) };

    // Act: one event per batch
    for (let attempt = 1; attempt < MAX_COMMIT_FAILURES; attempt += 1) await deliver(port([attempt], failing).port);
    const before = failures.length;
    await deliver(port([MAX_COMMIT_FAILURES], failing).port);

    // Assess
    expect(before).toBe(0);
    expect(batchLoop.state.commits.failuresInRow).toBe(MAX_COMMIT_FAILURES);
    expect(failures.map(({ message: text }) => text)).toEqual([`${MAX_COMMIT_FAILURES} offset commits in a row failed`]);
  });
});
