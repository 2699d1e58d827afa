import { randomBytes, randomUUID } from 'node:crypto';
import fc from 'fast-check';
import type { Message } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHost } from '../../host/run.js';
import type { HostHandle } from '../../host/run.js';
import { loadHostSettings } from '../../config/host-settings.js';
import { processBatch } from '../../shared/process-batch.js';
import { createPipelineRuntime } from '../../shared/runtime.js';
import { PIPELINE_NAMES } from '../../shared/pipelines.js';
import { consoleProduce, killConsoleProducers } from '../helpers/console-producer.js';
import {
  closeHostTestStack,
  committedOffsets,
  createTestPipelines,
  endOffsets,
  hostEnvironment,
  jsonMessages,
  openHostTestStack,
  waitForCommittedToEnd,
} from '../helpers/host.js';
import type { HostTestStack, PipelineNames } from '../helpers/host.js';
import { produce, testKafka } from '../helpers/kafka.js';
import { sampleAppStats, sampleNetworkMetrics, sampleReview } from '../helpers/messages.js';
import { captureLogger, testSettings } from '../helpers/lambda-events.js';

// docs/design.md section 3, step 1: whatever a record's envelope holds, the record ends as a row or a
// dead letter and the batch succeeds; only an event that is not a Kafka event is refused.

let stack: HostTestStack;
let names: PipelineNames;
let host: HostHandle;
const logger = captureLogger();

beforeAll(async () => {
  process.env.POWERTOOLS_LOG_LEVEL = 'WARN';
  stack = await openHostTestStack('envelopes');
  names = await createTestPipelines('envelopes');
  host = startHost(loadHostSettings(hostEnvironment({ databaseUrl: stack.schema.url, names, heartbeatDir: stack.heartbeats.path })), {
    logger,
  });
  expect(await host.running).toBe(true);
});

afterAll(async () => {
  await killConsoleProducers();
  await closeHostTestStack(stack ?? {}, host ? [host] : []);
});

async function query<T extends Record<string, unknown>>(sql: string, values: unknown[] = []): Promise<T[]> {
  return (await stack.schema.pool.query<T>(sql, values)).rows;
}

let sequence = 0;
const review = (overrides: Record<string, unknown> = {}) => ({ ...sampleReview(), review_id: `gp:env-${(sequence += 1)}`, ...overrides });

/** Sends each message in a produce request of its own, so every timestamp gets its own batch. */
async function produceOneByOne(topic: string, messages: readonly Message[]): Promise<void> {
  const producer = testKafka('envelopes-producer').producer({ allowAutoTopicCreation: false, idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  try {
    for (const message of messages) await producer.send({ topic, acks: -1, messages: [message] });
  } finally {
    await producer.disconnect();
  }
}

describe('any record envelope through the handler (real PostgreSQL)', () => {
  it('never throws for a well-formed event with arbitrary envelope fields, and accounts for every record', async () => {
    const runtime = createPipelineRuntime('reviews', testSettings(stack.schema.url), captureLogger());
    const anything = fc.oneof(
      fc.constant(undefined),
      fc.jsonValue({ maxDepth: 2 }),
      fc.constantFrom(-1, -5, 0, 2 ** 53, Number.MAX_SAFE_INTEGER, 2 ** 63, 'CREATE_TIME', 'LOG_APPEND_TIME', 'NO_TIMESTAMP_TYPE', {}),
    );
    const bytes = (text: string | Buffer) =>
      Array.from(Buffer.isBuffer(text) ? text : Buffer.from(text), (byte) => (byte > 127 ? byte - 256 : byte));
    const header = fc.oneof(
      fc
        .record({ name: fc.string({ maxLength: 8 }), value: fc.uint8Array({ maxLength: 8 }) })
        .map(({ name, value }) => ({ [name]: bytes(Buffer.from(value)) })),
      fc
        .record({ name: fc.string({ maxLength: 8 }), value: fc.uint8Array({ maxLength: 8 }) })
        .map(({ name, value }) => ({ [name]: Array.from(value) })),
      fc.constant({}),
      anything,
    );
    // Values: a valid review, text that is not one, nothing, an empty value, a value field that is not base64 at all.
    const value = fc.oneof(
      fc.constant('review'),
      fc.constantFrom('not json', '{"review_id": 1}', '\u00ff\u00fe'),
      fc.constantFrom(null, undefined, ''),
      fc.constantFrom(42, { value: 'x' }, [1, 2]),
    );
    const envelope = fc.record(
      {
        timestamp: anything,
        timestampType: anything,
        key: fc.oneof(
          anything,
          fc.uint8Array({ maxLength: 300 }).map((array) => Buffer.from(array).toString('base64')),
        ),
        value,
        headers: fc.oneof(anything, fc.array(header, { maxLength: 4 })),
      },
      { requiredKeys: ['value'] },
    );

    let run = 0;
    try {
      await fc.assert(
        fc.asyncProperty(fc.array(envelope, { minLength: 1, maxLength: 6 }), async (envelopes) => {
          // Prepare: a partition of its own per run, so each run's rows and letters are its own
          run += 1;
          const topic = names.topics.reviews;
          const partition = 1000 + run;
          const records = envelopes.map((fields, index) => {
            const { value: kind, ...rest } = fields;
            const encoded =
              kind === 'review'
                ? Buffer.from(JSON.stringify(review())).toString('base64')
                : typeof kind === 'string'
                  ? Buffer.from(kind, 'latin1').toString('base64')
                  : kind;
            return { ...rest, value: encoded, topic, partition, offset: index };
          });
          const event = JSON.parse(JSON.stringify({ eventSource: 'aws:kafka', records: { [`${topic}-${partition}`]: records } })) as {
            records: Record<string, Array<{ timestamp?: unknown }>>;
          };
          const sent = event.records[`${topic}-${partition}`] ?? [];

          // Act
          const { response, report } = await processBatch(event, runtime, { remainingMs: () => 60_000 });

          // Assess: one row or one dead letter per offset, the batch a success
          expect(response).toEqual({ batchItemFailures: [] });
          const stored = await query<{ offset: number; kind: string; kafka_timestamp: string | null }>(
            `SELECT source_offset::int AS offset, 'row' AS kind, NULL AS kafka_timestamp FROM reviews WHERE source_partition = $2
             UNION ALL SELECT kafka_offset::int, reason, round(extract(epoch FROM kafka_timestamp) * 1000)::bigint::text
             FROM dead_letter_events WHERE topic = $1 AND partition = $2 ORDER BY 1`,
            [topic, partition],
          );
          expect(stored.map((row) => row.offset)).toEqual(records.map((_record, index) => index));
          expect(report.records).toBe(records.length);
          expect(report.inserted + report.updated + report.skipped + report.deduplicated + report.deadLettered).toBe(records.length);
          for (const row of stored.filter((entry) => entry.kind !== 'row')) {
            const timestamp = sent[row.offset]?.timestamp;
            const exact = typeof timestamp === 'number' && Number.isSafeInteger(timestamp) && timestamp >= 0;
            expect(row.kafka_timestamp).toBe(exact ? String(timestamp) : null);
          }
        }),
        { numRuns: 40 },
      );
    } finally {
      await runtime.close();
    }
  });
});

describe('any record envelope through the host (real broker)', () => {
  it('stores the good records around hostile envelopes, commits past them, and no pipeline stops', async () => {
    // Prepare: on reviews partition 0, hostile envelopes between good records
    const topic = names.topics.reviews;
    const good = [review(), review(), review(), review()];
    const nonUtf8Key = randomBytes(200_000);
    nonUtf8Key[0] = 0xff;
    const messages: Message[] = [
      { partition: 0, value: JSON.stringify(good[0]) },
      // a producer writing nanoseconds, and the largest int64: the row is stored all the same
      { partition: 0, value: JSON.stringify(good[1]), timestamp: '9223372036854775807' },
      { partition: 0, value: 'not json', timestamp: '9223372036854775807' },
      { partition: 0, value: 'not json either', timestamp: '-1' },
      { partition: 0, value: null, key: 'tombstone' },
      { partition: 0, value: '' },
      { partition: 0, value: JSON.stringify(good[2]), key: nonUtf8Key, headers: { empty: '', repeated: ['a', 'b'] } },
      { partition: 0, value: '{"broken":', headers: { empty: '' }, key: nonUtf8Key },
      { partition: 0, value: JSON.stringify(good[3]) },
    ];

    // Act
    await produceOneByOne(topic, messages);
    await waitForCommittedToEnd(stack.admin, names.groups.reviews, topic);
    // the other two pipelines still consume
    await Promise.all([
      produce(names.topics['network-metrics'], jsonMessages([{ ...sampleNetworkMetrics(), analysis_id: randomUUID() }])),
      produce(names.topics['app-stats'], jsonMessages([sampleAppStats()])),
    ]);
    await waitForCommittedToEnd(stack.admin, names.groups['network-metrics'], names.topics['network-metrics']);
    await waitForCommittedToEnd(stack.admin, names.groups['app-stats'], names.topics['app-stats']);

    // Assess
    expect(host.state()).toBe('Running');
    expect(logger.lines.filter((line) => line.message === 'pipeline failed')).toEqual([]);
    const rows = await query<{ review_id: string; source_offset: string }>(
      'SELECT review_id, source_offset FROM reviews WHERE source_partition = 0 ORDER BY source_offset::bigint',
    );
    expect(rows).toEqual([
      { review_id: good[0]?.review_id, source_offset: '0' },
      { review_id: good[1]?.review_id, source_offset: '1' },
      { review_id: good[2]?.review_id, source_offset: '6' },
      { review_id: good[3]?.review_id, source_offset: '8' },
    ]);
    const letters = await query<{
      kafka_offset: string;
      reason: string;
      kafka_timestamp: Date | null;
      message_key: Buffer | null;
      headers: unknown;
    }>(
      'SELECT kafka_offset, reason, kafka_timestamp, message_key, headers FROM dead_letter_events WHERE topic = $1 AND partition = 0 ORDER BY kafka_offset::bigint',
      [topic],
    );
    expect(letters.map(({ kafka_offset, reason }) => [kafka_offset, reason])).toEqual([
      ['2', 'invalid_json'],
      ['3', 'invalid_json'],
      ['4', 'empty_message'],
      ['5', 'empty_message'],
      ['7', 'invalid_json'],
    ]);
    expect(letters[0]?.kafka_timestamp).toBeNull(); // beyond 2^53
    expect(letters[1]?.kafka_timestamp).toBeNull(); // -1
    expect(letters[2]?.kafka_timestamp).toBeInstanceOf(Date);
    expect(letters[2]?.message_key).toEqual(Buffer.from('tombstone'));
    expect(letters[4]?.message_key).toEqual(nonUtf8Key);
    expect(letters[4]?.headers).toEqual([{ name: 'empty', value: '' }]);
    expect((await committedOffsets(stack.admin, names.groups.reviews, topic)).get(0)).toBe(BigInt(messages.length));
    expect((await endOffsets(stack.admin, topic)).get(0)).toBe(BigInt(messages.length));
    expect((await query<{ n: number }>('SELECT count(*)::int AS n FROM network_metrics'))[0]?.n).toBe(1);
    expect((await query<{ n: number }>('SELECT count(*)::int AS n FROM app_stats'))[0]?.n).toBe(1);
    for (const pipeline of PIPELINE_NAMES)
      expect(logger.lines.filter((line) => line.extra.pipeline === pipeline && line.level === 'error')).toEqual([]);
  });

  it('stores headers in wire order, a repeated name interleaved and a null value as AWS sends it, from the Java client', async () => {
    // Prepare
    const topic = names.topics['network-metrics'];

    // Act: the Java client can write what kafkajs' producer cannot: trace=1, other=2, trace=3
    await consoleProduce({
      topic,
      codec: 'none',
      records: [
        {
          value: 'not a metrics message',
          headers: [
            ['trace', '1'],
            ['other', '2'],
            ['trace', '3'],
            ['gone', null],
            ['empty', ''],
          ],
        },
      ],
    });
    await waitForCommittedToEnd(stack.admin, names.groups['network-metrics'], topic);

    // Assess
    const letters = await query<{ headers: unknown }>(
      "SELECT headers FROM dead_letter_events WHERE topic = $1 AND reason = 'invalid_json'",
      [topic],
    );
    const b64 = (text: string) => Buffer.from(text).toString('base64');
    expect(letters).toEqual([
      {
        headers: [
          { name: 'trace', value: b64('1') },
          { name: 'other', value: b64('2') },
          { name: 'trace', value: b64('3') },
          // AWS sends a header whose value is null as {}: its name does not reach the handler
          { name: '', value: '' },
          { name: 'empty', value: '' },
        ],
      },
    ]);
    expect(host.state()).toBe('Running');
  });
});
