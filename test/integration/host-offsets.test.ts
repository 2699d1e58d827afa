import type { Admin } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createInProcessInvoker } from '../../host/invoker.js';
import type { InvocationResult, Invoker } from '../../host/invoker.js';
import { startHost } from '../../host/run.js';
import type { HostHandle } from '../../host/run.js';
import { loadHostSettings } from '../../config/host-settings.js';
import { RetryBudgetExhaustedError } from '../../shared/errors.js';
import type { KafkaEvent } from '../../shared/kafka-event.js';
import type { TestSchema } from '../helpers/database.js';
import {
  closeHostTestStack,
  committedOffsets,
  createTestPipelines,
  hostEnvironment,
  jsonMessages,
  openHostTestStack,
  waitForCommittedToEnd,
} from '../helpers/host.js';
import type { HostTestStack } from '../helpers/host.js';
import { produce } from '../helpers/kafka.js';
import { captureLogger } from '../helpers/lambda-events.js';
import { sampleReview } from '../helpers/messages.js';
import { deadlineIn } from '../../host/clock.js';

let schema: TestSchema;
let admin: Admin;
let heartbeats: HostTestStack['heartbeats'];
const hosts: HostHandle[] = [];

beforeAll(async () => {
  ({ schema, admin, heartbeats } = await openHostTestStack('host-offsets'));
});

afterAll(() => closeHostTestStack({ schema, admin, heartbeats }, hosts));

/** What one invocation of the reviews pipeline received, and what the group had committed then. */
interface Call {
  readonly offsets: number[];
  readonly committedBefore: bigint;
  readonly at: number;
}

type Script = (call: number, event: KafkaEvent, real: Invoker) => Promise<InvocationResult>;

/**
 * Runs an in-process host for the reviews pipeline alone whose invoker follows `script`
 * (the real handler is at hand to store rows), with 10 reviews on partition 0.
 */
async function runReviews(script: Script, extra: Record<string, string> = {}) {
  const names = await createTestPipelines('host-offsets');
  const topic = names.topics.reviews;
  const group = names.groups.reviews;
  const reviews = Array.from({ length: 10 }, (_, index) => ({ ...sampleReview(), review_id: `${topic}:${index}` }));
  await produce(topic, jsonMessages(reviews, { partition: 0 }));

  const settings = loadHostSettings(
    hostEnvironment({
      databaseUrl: schema.url,
      names,
      heartbeatDir: heartbeats.path,
      extra: { STORAGE_PIPELINES: 'reviews', ...extra },
    }),
  );
  const calls: Call[] = [];
  const logger = captureLogger();
  const host = startHost(settings, {
    logger,
    createInvoker: (pipeline, hostSettings) => {
      const real = createInProcessInvoker(pipeline, hostSettings.storage);
      return {
        async invoke(event, deadline) {
          const offsets = (event.records[`${topic}-0`] ?? []).map((record) => record.offset);
          const committedBefore = (await committedOffsets(admin, group, topic)).get(0) ?? -1n;
          calls.push({ offsets, committedBefore, at: Date.now() });
          void deadline;
          return script(calls.length - 1, event, real);
        },
        close: () => real.close(),
      };
    },
  });
  hosts.push(host);
  expect(await host.running).toBe(true);
  return { host, calls, logger, topic, group, key: `${topic}-0` };
}

/** The event with only its records below `offset`. */
function below(event: KafkaEvent, offset: number): KafkaEvent {
  return {
    ...event,
    records: Object.fromEntries(
      Object.entries(event.records).map(([key, records]) => [key, records.filter((record) => record.offset < offset)]),
    ),
  };
}

const farDeadline = () => deadlineIn(60_000);

async function storedReviews(topic: string): Promise<number[]> {
  const { rows } = await schema.pool.query<{ offset: string }>(
    "SELECT source_offset::text AS offset FROM reviews WHERE review_id LIKE $1 || ':%' ORDER BY source_offset",
    [topic],
  );
  return rows.map((row) => Number(row.offset));
}

/**
 * The first invocation stores offsets 0-3 and reports 4 as failed; later ones store what they
 * get. Asserts the report was honoured: 4 committed, redelivered from 4, every review stored.
 */
async function expectReportHonoured(extra: Record<string, string>) {
  // Prepare / Act
  const run = await runReviews(async (call, event, real) => {
    if (call > 0) return real.invoke(event, farDeadline());
    await real.invoke(below(event, 4), farDeadline());
    const key = Object.keys(event.records)[0];
    return { kind: 'response', payload: { batchItemFailures: [{ itemIdentifier: { partition: key, offset: 4 } }] } };
  }, extra);
  const committed = await waitForCommittedToEnd(admin, run.group, run.topic);

  // Assess
  expect(run.calls.map((call) => [call.offsets[0], call.offsets.at(-1), call.committedBefore])).toEqual([
    [0, 9, -1n],
    [4, 9, 4n],
  ]);
  expect(committed.get(0)).toBe(10n);
  expect(await storedReviews(run.topic)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  return run;
}

describe('host offsets: batchItemFailures (ReportBatchItemFailures on)', () => {
  it('commits up to the failed offset, then redelivers from it', async () => {
    const { host } = await expectReportHonoured({});
    expect(await host.stop()).toBe(0);
  });

  it('redelivers the whole batch when an identifier names an offset that is not in the event', async () => {
    // Prepare / Act
    const { host, calls, logger, topic, group, key } = await runReviews(async (call, event, real) => {
      if (call > 0) return real.invoke(event, farDeadline());
      return { kind: 'response', payload: { batchItemFailures: [{ itemIdentifier: { partition: key, offset: 999 } }] } };
    });
    await waitForCommittedToEnd(admin, group, topic);

    // Assess
    expect(calls.map((call) => [call.offsets[0], call.offsets.length, call.committedBefore])).toEqual([
      [0, 10, -1n],
      [0, 10, -1n],
    ]);
    expect(logger.lines.find((line) => line.message.startsWith('batch not stored'))?.extra).toMatchObject({
      outcome: 'failed',
      reason: expect.stringContaining('not in the event'),
    });
    expect(await storedReviews(topic)).toHaveLength(10);
    expect(await host.stop()).toBe(0);
  });

  it('redelivers from the same offset after a back-off when the retry budget ran out', async () => {
    // Prepare / Act
    const { host, calls, topic, group } = await runReviews(
      async (call, event, real) => {
        if (call > 1) return real.invoke(event, farDeadline());
        return { kind: 'error', error: new RetryBudgetExhaustedError('database still failing'), fatal: false };
      },
      { STORAGE_INVOKE_RETRY_BASE_MS: '300' },
    );
    await waitForCommittedToEnd(admin, group, topic);

    // Assess: 300 ms, then 600 ms (doubling), nothing committed meanwhile
    expect(calls.map((call) => [call.offsets[0], call.committedBefore])).toEqual([
      [0, -1n],
      [0, -1n],
      [0, -1n],
    ]);
    const [first, second, third] = calls.map((call) => call.at) as [number, number, number];
    expect(second - first).toBeGreaterThanOrEqual(300);
    expect(third - second).toBeGreaterThanOrEqual(600);
    expect(await host.stop()).toBe(0);
  });

  it('stops with exit code 1 and commits nothing after a fatal handler error', async () => {
    // Prepare / Act
    const { host, calls, topic, group } = await runReviews(async () => ({
      kind: 'error',
      error: Object.assign(new Error('relation "reviews" does not exist'), { code: '42P01' }),
      fatal: true,
    }));

    // Assess
    expect(await host.done).toBe(1);
    expect(calls).toHaveLength(1);
    expect((await committedOffsets(admin, group, topic)).get(0)).toBe(-1n);
  });
});

describe('host offsets: ReportBatchItemFailures off', () => {
  it('still honours a failure report (on AWS the batch would be lost): commits below the failed offset, redelivers from it, logs an ERROR', async () => {
    const { host, logger } = await expectReportHonoured({ STORAGE_REPORT_BATCH_ITEM_FAILURES: 'false' });
    expect(logger.lines.find((line) => line.message.startsWith('failure report honoured'))).toMatchObject({
      level: 'error',
      extra: { pipeline: 'reviews', reportedFailures: 1 },
    });
    expect(await host.stop()).toBe(0);
  });
});
