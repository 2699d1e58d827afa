import type { CommitRequest, ConsumerCrash, ConsumerPort, GroupJoin, PartitionHandle } from '../../../kafka/port.js';
import { unreadableOf } from '../../../kafka/kafkajs/consumer.js';
import type { SourceRecord } from '../../../shared/kafka-event-builder.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import type { PipelineFailedError } from '../../../host/pipeline-failure.js';
import type { InvocationResult, Invoker } from '../../../host/invoker.js';
import { MAX_COMMIT_FAILURES } from '../../../host/offset-commits.js';
import { createPipelineConsumer } from '../../../host/topic-consumer.js';
import { PipelineProgress } from '../../../host/progress.js';
import type { PipelineConsumer } from '../../../host/topic-consumer.js';
import { loadHostSettings } from '../../../config/host-settings.js';
import type { HostSettings } from '../../../config/host-settings.js';
import type { KafkaEvent } from '../../../shared/kafka-event.js';

// The pipeline consumer against a plain-object consumer port (kafka/port.ts): the paths
// a real broker can hardly be made to take on cue (commit failures, a rebalance mid-batch, a
// stop between events, a pause read late).

const SETTINGS_ENV = {
  KAFKA_BROKERS: '127.0.0.1:9092',
  STORAGE_MAX_POLL_RECORDS_REVIEWS: '2',
  STORAGE_INVOKE_RETRY_BASE_MS: '1',
  STORAGE_HEARTBEAT_DIR: '/nonexistent',
};
const settings = loadHostSettings(SETTINGS_ENV);

function message(offset: number): SourceRecord {
  return { topic: 'reviews', partition: 1, key: null, value: Buffer.from('{}'), timestamp: '0', offset: String(offset), headers: [] };
}

interface Harness {
  readonly eachBatch: (payload: PartitionHandle) => Promise<void>;
  readonly invocations: Array<readonly number[]>;
  readonly seeks: Array<{ partition: number; offset: string }>;
  readonly paused: unknown[];
  readonly failures: PipelineFailedError[];
  readonly warnings: string[];
  /** Every warn/error line with its JSON fields. */
  readonly lines: Array<{ message: string; extra: Record<string, unknown> }>;
  readonly progress: PipelineProgress;
  readonly resumed: unknown[];
  readonly pipeline: PipelineConsumer;
  /** Tells the consumer's join listeners of a join. */
  readonly emit: (event: 'join', payload: GroupJoin) => void;
  /** Tells the consumer's crash listeners of a crash. */
  readonly crash: (crash: ConsumerCrash) => void;
}

/** A consumer on a fake kafkajs; its pause state is read (not paused) before the start, as the host does, unless `pauseRead` is false. */
async function harness(
  answer: (call: number, event: KafkaEvent) => InvocationResult,
  pauseRead = true,
  options: { disconnect?: () => Promise<void>; settings?: HostSettings; join?: boolean } = {},
): Promise<Harness> {
  let eachBatch: ((payload: PartitionHandle) => Promise<void>) | undefined;
  const seeks: Harness['seeks'] = [];
  const paused: unknown[] = [];
  const resumed: unknown[] = [];
  const listeners = {
    join: [] as Array<(join: GroupJoin) => void>,
    rebalancing: [] as Array<() => void>,
    crash: [] as Array<(crash: ConsumerCrash) => void>,
  };
  const consumer: ConsumerPort = {
    onGroupJoin: (listener) => listeners.join.push(listener),
    onRebalancing: (listener) => listeners.rebalancing.push(listener),
    onCrash: (listener) => listeners.crash.push(listener),
    connect: async () => undefined,
    subscribe: async () => undefined,
    run: async (config) => {
      eachBatch = config.eachBatch;
    },
    seek: ({ partition, offset }) => seeks.push({ partition, offset }),
    pause: (topics) => paused.push(topics),
    resume: (topics) => resumed.push(topics),
    disconnect: options.disconnect ?? (async () => undefined),
    onFetched: () => () => undefined,
  };
  const invocations: Array<readonly number[]> = [];
  const invoker: Invoker = {
    invoke: async (event) => {
      invocations.push(
        Object.values(event.records)
          .flat()
          .map((record) => record.offset),
      );
      return answer(invocations.length - 1, event);
    },
    close: async () => undefined,
  };
  const failures: PipelineFailedError[] = [];
  const warnings: string[] = [];
  const lines: Harness['lines'] = [];
  const take = (text: string, extra: Record<string, unknown> = {}) => {
    warnings.push(text);
    lines.push({ message: text, extra });
  };
  const logger = { debug: () => undefined, info: () => undefined, warn: take, error: take };
  const progress = new PipelineProgress({ pipeline: 'reviews', topic: 'reviews', group: 'storage-consumer.reviews' });
  const pipeline = createPipelineConsumer({
    pipeline: settings.storage.pipelines.reviews,
    settings: options.settings ?? settings,
    consumers: () => consumer,
    invoker,
    logger,
    onFailure: (error) => failures.push(error),
    progress,
  });
  if (pauseRead) pipeline.setPaused(undefined);
  await pipeline.start();
  const given = eachBatch;
  if (!given) throw new Error('run() was not given eachBatch');
  const emit = (event: 'join', payload: GroupJoin) => {
    for (const listener of listeners[event]) listener(payload);
  };
  // kafkajs' callback returns once the batch is taken in; the cases read what was written of it.
  const deliver = async (polled: PartitionHandle) => {
    await given(polled);
    await pipeline.idle();
  };
  const crash = (payload: ConsumerCrash) => {
    for (const listener of listeners.crash) listener(payload);
  };
  // kafkajs joins the group inside run(), before the first batch: the member owns partition 1 (the payloads').
  if (options.join !== false)
    emit('join', { memberId: 'member-1', groupId: 'storage-consumer.reviews', memberAssignment: { reviews: [1] } });
  return { eachBatch: deliver, invocations, seeks, paused, failures, warnings, lines, progress, resumed, pipeline, emit, crash };
}

interface FakePayload extends PartitionHandle {
  readonly resolved: string[];
  readonly commits: string[];
}

function payload(
  offsets: readonly number[],
  options: {
    commit?: () => Promise<void>;
    heartbeat?: () => Promise<void>;
    isRunning?: () => boolean;
    isStale?: () => boolean;
  } = {},
): FakePayload {
  const resolved: string[] = [];
  const commits: string[] = [];
  return {
    batch: {
      topic: 'reviews',
      partition: 1,
      highWatermark: String((offsets.at(-1) ?? 0) + 1),
      records: offsets.map(message),
      firstOffset: () => String(offsets[0]),
      lastOffset: () => String(offsets.at(-1)),
    },
    resolveOffset: (offset: string) => resolved.push(offset),
    heartbeat: options.heartbeat ?? (async () => undefined),
    commitOffsetsIfNecessary: async (offsets?: CommitRequest) => {
      await options.commit?.();
      commits.push(
        ...(offsets?.topics.flatMap((topic) => topic.partitions.map((partition) => `${partition.partition}@${partition.offset}`)) ?? []),
      );
    },
    isRunning: options.isRunning ?? (() => true),
    isStale: options.isStale ?? (() => false),
    resolved,
    commits,
  };
}

const ok: InvocationResult = { kind: 'response', payload: { batchItemFailures: [] } };

describe('pipeline consumer (the runner)', () => {
  it('fetches and invokes nothing before its pause state was read once, then obeys what was read', async () => {
    // Prepare: a host that could not read pipeline_pauses before the start
    const topic = [{ topic: settings.storage.pipelines.reviews.topic }];
    const runner = await harness(() => ok, false, { join: false });
    const pause = { pipeline: 'reviews' as const, paused: true, by: 'ops', at: new Date(), reason: null };

    // Act: the group is joined and a fetch delivers records before the state is known
    runner.emit('join', { memberId: 'm-1', groupId: 'g', memberAssignment: { reviews: [1] } });
    const waiting = payload([10, 11]);
    await runner.eachBatch(waiting);
    const whileUnknown = runner.progress.snapshot();
    // The first read says paused: still nothing; a rejoin stays paused.
    runner.pipeline.setPaused(pause);
    await runner.eachBatch(payload([10, 11]));
    runner.emit('join', { memberId: 'm-1', groupId: 'g', memberAssignment: { reviews: [1] } });
    runner.pipeline.setPaused(undefined);
    await runner.eachBatch(payload([10, 11]));

    // Assess
    expect(waiting.resolved).toEqual([]);
    expect(whileUnknown).toMatchObject({ pause: 'unknown', paused: false, inFlight: [] });
    expect(runner.paused).toEqual([topic, topic, topic]);
    expect(runner.warnings).toContain('pause state not read yet; the pipeline joins its group but fetches nothing until it is read');
    expect(runner.invocations).toEqual([[10, 11]]);
    expect(runner.resumed).toEqual([topic]);
  });

  it('on a pause, commits the event in flight, invokes nothing more, and pauses again on every join', async () => {
    // Prepare: the pause arrives while the first event is being invoked
    const topic = [{ topic: settings.storage.pipelines.reviews.topic }];
    const pause = { pipeline: 'reviews' as const, paused: true, by: 'ops', at: new Date(), reason: null };
    const box: { runner?: Harness } = {};
    const runner = await harness(() => {
      box.runner?.pipeline.setPaused(pause);
      return ok;
    });
    box.runner = runner;
    const polled = payload([10, 11, 12, 13]);

    // Act
    await runner.eachBatch(polled);
    await runner.eachBatch(payload([14]));
    runner.emit('join', { memberId: 'm-1', groupId: 'g', memberAssignment: { reviews: [1] } });
    const whilePaused = runner.progress.snapshot();
    runner.pipeline.setPaused(undefined);
    runner.emit('join', { memberId: 'm-1', groupId: 'g', memberAssignment: { reviews: [1] } });

    // Assess: the first event stored and committed; the fetch position, resolved to the batch's
    // end when it was taken in, goes back to the rest, for the first fetch after the resume
    expect(runner.invocations).toEqual([[10, 11]]);
    expect(polled.commits).toEqual(['1@12']);
    expect(polled.resolved).toEqual(['13']);
    expect(runner.seeks).toEqual([{ partition: 1, offset: '12' }]);
    expect(runner.paused).toEqual([topic, topic]);
    expect(runner.resumed).toEqual([topic]);
    expect(whilePaused).toMatchObject({ paused: true, inGroup: true, assignment: [1], inFlight: [] });
    expect(runner.progress.snapshot()).toMatchObject({ paused: false, inGroup: true });
    expect(runner.pipeline.memberId()).toBe('m-1');
  });

  it('cuts a polled batch into events, resolves the fetch position once, and commits each event after its invocation', async () => {
    // Prepare
    const runner = await harness(() => ok);
    const polled = payload([10, 11, 12]);

    // Act
    await runner.eachBatch(polled);

    // Assess
    expect(runner.invocations).toEqual([[10, 11], [12]]);
    expect(polled.resolved).toEqual(['12']);
    expect(polled.commits).toEqual(['1@12', '1@13']);
  });

  it('warns about a failed commit and goes on; after five in a row the pipeline fails', async () => {
    // Prepare
    const runner = await harness(() => ok);

    // Act
    for (let batch = 0; batch < MAX_COMMIT_FAILURES; batch += 1) {
      await runner.eachBatch(payload([batch], { commit: () => Promise.reject(new Error('REBALANCE_IN_PROGRESS')) }));
    }

    // Assess: every batch was still invoked; the fifth failure failed the pipeline
    expect(runner.invocations).toHaveLength(MAX_COMMIT_FAILURES);
    expect(runner.warnings.filter((text) => text.startsWith('offset commit failed'))).toHaveLength(MAX_COMMIT_FAILURES);
    expect(runner.failures.map((error) => error.message)).toEqual(['pipeline reviews failed: 5 offset commits in a row failed']);
    expect(runner.paused).toEqual([[{ topic: settings.storage.pipelines.reviews.topic }]]);
  });

  it('counts only consecutive commit failures', async () => {
    // Prepare
    const runner = await harness(() => ok);
    const failing = { commit: () => Promise.reject(new Error('NOT_COORDINATOR')) };

    // Act: four failures, one success, four failures
    for (let batch = 0; batch < 4; batch += 1) await runner.eachBatch(payload([batch], failing));
    await runner.eachBatch(payload([4]));
    for (let batch = 5; batch < 9; batch += 1) await runner.eachBatch(payload([batch], failing));

    // Assess: and the record says committed only what was: 5, from the one commit that succeeded
    expect(runner.failures).toEqual([]);
    expect(runner.progress.snapshot().partitions).toMatchObject([{ partition: 1, committed: '5' }]);
  });

  it('drops a batch whose partition was reassigned during the invocation: nothing committed', async () => {
    // Prepare: the partition goes stale (a seek pending) while the first event is being invoked
    let stale = false;
    const runner = await harness(() => {
      stale = true;
      return ok;
    });
    const polled = payload([1, 2, 3], { isStale: () => stale });

    // Act
    await runner.eachBatch(polled);

    // Assess: nothing committed, and no seek of its own: the pending one says where the partition goes on
    expect(runner.invocations).toEqual([[1, 2]]);
    expect(polled.commits).toEqual([]);
    expect(runner.seeks).toEqual([]);
  });

  it('invokes nothing more once the consumer is stopping, but commits the event in flight', async () => {
    // Prepare
    let running = true;
    const runner = await harness(() => {
      running = false;
      return ok;
    });
    const polled = payload([1, 2, 3], { isRunning: () => running });

    // Act
    await runner.eachBatch(polled);

    // Assess
    expect(runner.invocations).toEqual([[1, 2]]);
    expect(polled.commits).toEqual(['1@3']);
  });

  it('leaves the rest of a batch alone when a heartbeat fails between events (a rebalance)', async () => {
    // Prepare
    const runner = await harness(() => ok);
    const polled = payload([1, 2, 3], { heartbeat: () => Promise.reject(new Error('REBALANCE_IN_PROGRESS')) });

    // Act
    await runner.eachBatch(polled);

    // Assess: the fetch position goes back to the event not invoked (it was resolved past it)
    expect(runner.invocations).toEqual([[1, 2]]);
    expect(polled.commits).toEqual(['1@3']);
    expect(runner.seeks).toEqual([{ partition: 1, offset: '3' }]);
  });

  it('redelivers after a non-fatal error: nothing committed, a seek to the first offset of the event', async () => {
    // Prepare: the second event fails
    const runner = await harness((call) => (call === 1 || call === 2 ? { kind: 'error', error: new Error('budget'), fatal: false } : ok));
    const polled = payload([1, 2, 3, 4, 5]);

    // Act
    await runner.eachBatch(polled);

    // Assess
    expect(runner.invocations).toEqual([
      [1, 2],
      [3, 4],
    ]);
    expect(polled.commits).toEqual(['1@3']);
    expect(runner.seeks).toEqual([{ partition: 1, offset: '3' }]);
    expect(runner.failures).toEqual([]);
    // The line and the progress record say where: the failed event's partition and offsets.
    expect(runner.lines.find((line) => line.message.startsWith('batch not stored'))?.extra).toMatchObject({
      topic: 'reviews',
      partition: 1,
      first_offset: '3',
      last_offset: '4',
      attempt: 1,
      batchAttempt: 1,
      error: 'Error: budget',
    });
    const snapshot = runner.progress.snapshot();
    expect(snapshot.inFlight).toMatchObject([
      // After the back-off the loop lets go of it: it waits for its redelivery, which needs a fetch.
      {
        topic: 'reviews',
        partition: 1,
        firstOffset: '3',
        lastOffset: '4',
        attempt: 1,
        busy: false,
        lastError: { message: 'Error: budget' },
      },
    ]);
    expect(snapshot.partitions).toMatchObject([{ partition: 1, committed: '3' }]);

    // Act: the redelivery fails again
    await runner.eachBatch(payload([3, 4, 5]));
    expect(runner.progress.snapshot().inFlight).toMatchObject([{ firstOffset: '3', attempt: 2 }]);
  });

  it('a crash kafkajs restarts from is counted, not fatal; one it does not restart from fails the pipeline, naming an unreadable codec', async () => {
    // Prepare
    const runner = await harness(() => ok);
    const unreadable = Object.assign(new Error('Snappy compression not implemented'), { name: 'KafkaJSNotImplemented' });

    // Act
    runner.crash({ error: new Error('Connection error: connect ECONNREFUSED'), restart: true });
    const afterRetriable = runner.failures.length;
    const crashes = runner.progress.snapshot().crashesSinceFetch;
    runner.crash({ error: unreadable, restart: false, unreadable: unreadableOf(unreadable) });

    // Assess
    expect(afterRetriable).toBe(0);
    expect(crashes).toBe(1);
    expect(runner.failures.map((error) => error.message)).toEqual([
      'pipeline reviews failed: topic reviews holds a record batch compressed with snappy that this host cannot read: Snappy compression not implemented',
    ]);
  });

  it('keeps the stored batch and the committed offset in the progress record', async () => {
    // Prepare
    const runner = await harness(() => ok);

    // Act
    await runner.eachBatch(payload([7, 8, 9]));

    // Assess
    const snapshot = runner.progress.snapshot();
    expect(snapshot.inFlight).toEqual([]);
    expect(snapshot.lastStoredAt).toBeTypeOf('number');
    expect(snapshot.partitions).toMatchObject([{ partition: 1, committed: '10' }]);
  });

  it('fails the pipeline on a fatal error without committing or seeking', async () => {
    // Prepare
    const runner = await harness(() => ({ kind: 'error', error: new TypeError('bug'), fatal: true }));
    const polled = payload([1, 2]);

    // Act
    await runner.eachBatch(polled);
    await runner.eachBatch(payload([1, 2]));

    // Assess
    expect(runner.invocations).toHaveLength(1);
    expect(polled.commits).toEqual([]);
    expect(runner.seeks).toEqual([]);
    expect(runner.failures.map((error) => error.message)).toEqual(['pipeline reviews failed: fatal handler error: TypeError: bug']);
    expect(runner.failures[0]?.batch).toEqual({ topic: 'reviews', partition: 1, firstOffset: '1', lastOffset: '2' });
    expect(runner.lines.find((line) => line.message === 'pipeline failed')?.extra).toMatchObject({
      pipeline: 'reviews',
      topic: 'reviews',
      partition: 1,
      first_offset: '1',
      last_offset: '2',
    });
    expect(runner.progress.snapshot().ended).toBe('failed');
  });

  it("once its writes are over, a failed pipeline's stop waits for kafkajs' leave a poll and 2 s at most, and says so", async () => {
    // Prepare: a leave that never ends (the broker gone), a member in the group, a poll of 10 ms
    const quick = loadHostSettings({ ...SETTINGS_ENV, STORAGE_POLL_TIMEOUT_MS: '10' });
    let leaves = 0;
    const runner = await harness(() => ({ kind: 'error', error: new TypeError('bug'), fatal: true }), true, {
      settings: quick,
      disconnect: () => {
        leaves += 1;
        return new Promise<void>(() => undefined);
      },
    });
    runner.emit('join', { memberId: 'm-1', groupId: 'g', memberAssignment: { reviews: [1] } });
    await runner.eachBatch(payload([1, 2]));
    expect(runner.failures).toHaveLength(1);

    // Act
    const started = performance.now();
    await runner.pipeline.stop();
    const tookMs = performance.now() - started;

    // Assess
    expect(leaves).toBe(1);
    expect(tookMs).toBeGreaterThanOrEqual(2_000);
    expect(tookMs).toBeLessThan(2_010 + 1_000);
    expect(runner.lines.find((line) => line.message.startsWith('stopped without leaving the consumer group'))?.extra).toMatchObject({
      pipeline: 'reviews',
      waitedMs: 2_010,
      failed: true,
    });
  });

  it("a healthy member's stop waits for kafkajs' leave (the shutdown timeout bounds it)", async () => {
    // Prepare: a leave that ends when the test says so
    let leave: (() => void) | undefined;
    const runner = await harness(() => ok, true, {
      settings: loadHostSettings({ ...SETTINGS_ENV, STORAGE_POLL_TIMEOUT_MS: '10' }),
      disconnect: () => new Promise<void>((resolve) => (leave = resolve)),
    });
    runner.emit('join', { memberId: 'm-1', groupId: 'g', memberAssignment: { reviews: [1] } });
    let stopped = false;

    // Act
    const stopping = runner.pipeline.stop().then(() => (stopped = true));
    await sleep(2_200);
    const beforeLeave = stopped;
    leave?.();
    await stopping;

    // Assess
    expect(beforeLeave).toBe(false);
    expect(stopped).toBe(true);
    expect(runner.lines.some((line) => line.message.startsWith('stopped without leaving'))).toBe(false);
  });
});
