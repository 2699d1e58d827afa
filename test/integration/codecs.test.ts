import { randomUUID } from 'node:crypto';
import kafkajs from 'kafkajs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { KAFKA_CODECS, PROJECT_CODECS } from '../../kafka/kafkajs/codecs.js';
import { startHost } from '../../host/run.js';
import type { HostHandle } from '../../host/run.js';
import { loadHostSettings } from '../../config/host-settings.js';
import { consoleProduce, killConsoleProducers } from '../helpers/console-producer.js';
import {
  closeHostTestStack,
  committedOffsets,
  createTestPipelines,
  hostEnvironment,
  openHostTestStack,
  waitForCommittedToEnd,
} from '../helpers/host.js';
import type { HostTestStack, PipelineNames } from '../helpers/host.js';
import { sampleNetworkMetrics } from '../helpers/messages.js';
import { captureLogger } from '../helpers/lambda-events.js';
import { runCli } from '../helpers/cli.js';
import { testKafka } from '../helpers/kafka.js';
import { spoilFirstGzipBatch } from '../helpers/kafka-disk.js';

// docs/design.md section 1, issue 9: producers compress batches with gzip, snappy, lz4 or zstd, and
// Lambda's event source mapping reads all four; so does the host, on either Kafka client (CI runs
// this file again with KAFKA_CLIENT=platformatic). Kafka's own Java producer writes the batches.
// The codec table of kafkajs (this project fills it: kafka/kafkajs/codecs.ts) is instrumented and
// emptied only on kafkajs; @platformatic/kafka's codecs are its own.

/** The run's Kafka client (test/helpers/host.ts hands it to every host). */
const onKafkajs = (process.env.KAFKA_CLIENT?.trim() || 'kafkajs') === 'kafkajs';

type Codec = { compress(encoder: { buffer: Buffer }): Promise<Buffer>; decompress(buffer: Buffer): Promise<Buffer> };
const table = kafkajs.CompressionCodecs as Record<number, () => Codec>;

let stack: HostTestStack;
const hosts: HostHandle[] = [];

beforeAll(async () => {
  process.env.POWERTOOLS_LOG_LEVEL = 'WARN';
  stack = await openHostTestStack('codecs');
});

afterEach(() => {
  // Whatever a test did to the shared table, the next starts from the project's codecs.
  Object.assign(table, PROJECT_CODECS);
});

afterAll(async () => {
  await killConsoleProducers();
  await closeHostTestStack(stack ?? {}, hosts);
});

function host(names: PipelineNames, logger = captureLogger()): { handle: HostHandle; logger: ReturnType<typeof captureLogger> } {
  const handle = startHost(
    loadHostSettings(hostEnvironment({ databaseUrl: stack.schema.url, names, heartbeatDir: stack.heartbeats.path })),
    { logger },
  );
  hosts.push(handle);
  return { handle, logger };
}

/** Counts the batches each codec decompresses in this process (the in-process host's). */
function countDecompressions(): Map<string, number> {
  const counts = new Map<string, number>();
  for (const [id, name] of Object.entries(KAFKA_CODECS)) {
    const codec = PROJECT_CODECS[Number(id)]!();
    table[Number(id)] = () => ({
      compress: (encoder) => codec.compress(encoder),
      decompress: (buffer) => {
        counts.set(name, (counts.get(name) ?? 0) + 1);
        return codec.decompress(buffer);
      },
    });
  }
  return counts;
}

const metrics = () => ({ ...sampleNetworkMetrics(), analysis_id: randomUUID() });

describe('compressed batches', () => {
  it('stores every record the Java console producer writes in gzip, snappy, lz4 and zstd', async () => {
    // Prepare
    const names = await createTestPipelines('codecs');
    const decompressed = countDecompressions();
    const { handle, logger } = host(names);
    expect(await handle.running).toBe(true);
    const topic = names.topics['network-metrics'];
    const sent = new Map<string, string[]>();

    // Act: three records per codec, one codec after the other
    for (const codec of Object.values(KAFKA_CODECS)) {
      const values = [metrics(), metrics(), metrics()];
      sent.set(
        codec,
        values.map((value) => value.analysis_id),
      );
      await consoleProduce({ topic, codec, records: values.map((value) => ({ value: JSON.stringify(value) })) });
    }
    await waitForCommittedToEnd(stack.admin, names.groups['network-metrics'], topic);

    // Assess
    const { rows } = await stack.schema.pool.query<{ analysis_id: string }>('SELECT analysis_id FROM network_metrics');
    const stored = new Set(rows.map((row) => row.analysis_id));
    for (const [codec, ids] of sent) {
      expect(
        ids.filter((id) => stored.has(id)),
        codec,
      ).toEqual(ids);
      // kafkajs decompresses through the project's codecs; platformatic through its own.
      if (onKafkajs) expect(decompressed.get(codec) ?? 0, `${codec} batches decompressed`).toBeGreaterThan(0);
    }
    const { rows: letters } = await stack.schema.pool.query('SELECT 1 FROM dead_letter_events WHERE topic = $1', [topic]);
    expect(letters).toEqual([]);
    expect(handle.state()).toBe('Running');
    expect(logger.lines.filter((line) => line.level === 'error')).toEqual([]);
  });

  // A kafkajs without a codec (as kafkajs ships, without lz4): only kafkajs has a codec table to empty.
  it.runIf(onKafkajs)(
    'stops with one clear error naming the codec and the topic when a codec cannot be read, and does so again on a restart',
    async () => {
      // Prepare: an lz4 batch on the topic, and a client without lz4 (as kafkajs ships)
      const names = await createTestPipelines('codecs-missing');
      const topic = names.topics['network-metrics'];
      await consoleProduce({ topic, codec: 'lz4', records: [{ value: JSON.stringify(metrics()) }] });
      table[kafkajs.CompressionTypes.LZ4] = () => {
        throw new (kafkajs.KafkaJSNotImplemented as unknown as new (message: string) => Error)('LZ4 compression not implemented');
      };

      for (const start of ['first start', 'restart']) {
        // Act
        const { handle, logger } = host(names);
        const exitCode = await handle.done;

        // Assess
        expect(exitCode, start).toBe(1);
        const failures = logger.lines.filter((line) => line.message === 'pipeline failed');
        expect(failures, start).toHaveLength(1);
        expect(failures[0]?.extra).toMatchObject({ pipeline: 'network-metrics', topic, first_offset: '0', last_offset: '0' });
        const partition = failures[0]?.extra.partition as number;
        expect(failures[0]?.extra.error).toBe(
          `pipeline network-metrics failed: topic ${topic} partition ${partition} holds a record batch compressed with lz4 at offsets 0..0 that this host cannot read: ` +
            `LZ4 compression not implemented; if Kafka's own clients cannot read it either, step over it with: storage-consumer replay network-metrics --partition ${partition} --to-offset 1 --allow-skip`,
        );
        // The failure may come before the host has reported Running (seen on a restart, where the
        // group already exists and the first fetch is quicker); either way it fails, then stops.
        const states = logger.lines.filter((line) => typeof line.extra.state === 'string').map((line) => line.extra.state);
        expect(
          [
            ['Running', 'Failing', 'Stopped'],
            ['Failing', 'Stopped'],
          ],
          start,
        ).toContainEqual(states);
        // nothing was skipped: the batch is still there for a host that can read it
        expect([...(await committedOffsets(stack.admin, names.groups['network-metrics'], topic)).values()], start).toEqual([-1n, -1n, -1n]);
      }

      // Act: with the codec back, the same group stores the record
      Object.assign(table, PROJECT_CODECS);
      const { handle } = host(names);
      expect(await handle.running).toBe(true);
      await waitForCommittedToEnd(stack.admin, names.groups['network-metrics'], topic);
      await handle.stop();
    },
  );

  it('names the partition and the record batch it cannot read, and the replay it prints steps over exactly that batch', async () => {
    // Prepare: three records stored; then, on the same partition, one gzip batch of five records
    // spoilt on the broker's disk (no client can inflate it), and two plain records after it.
    const names = await createTestPipelines('codecs-corrupt');
    const topic = names.topics['network-metrics'];
    const group = names.groups['network-metrics'];
    const env = hostEnvironment({ databaseUrl: stack.schema.url, names, heartbeatDir: stack.heartbeats.path });
    const producer = testKafka('codecs-corrupt').producer({ allowAutoTopicCreation: false });
    await producer.connect();
    const sent = { good: [] as string[], skipped: [] as string[] };
    const send = (count: number, compression: kafkajs.CompressionTypes) => {
      const values = Array.from({ length: count }, () => metrics());
      (compression === kafkajs.CompressionTypes.None ? sent.good : sent.skipped).push(...values.map((value) => value.analysis_id));
      return producer.send({
        topic,
        acks: -1,
        compression,
        messages: values.map((value) => ({ partition: 2, value: JSON.stringify(value) })),
      });
    };
    try {
      await send(3, kafkajs.CompressionTypes.None);
      const first = host(names);
      expect(await first.handle.running).toBe(true);
      await waitForCommittedToEnd(stack.admin, group, topic);
      await first.handle.stop();
      await send(5, kafkajs.CompressionTypes.GZIP);
      await send(2, kafkajs.CompressionTypes.None);
    } finally {
      await producer.disconnect();
    }
    expect(await spoilFirstGzipBatch(topic, 2)).toEqual({ first: '3', last: '7' });

    // Act
    const { handle, logger } = host(names);
    const exitCode = await handle.done;

    // Assess: the line names where, in its fields and in the command
    expect(exitCode).toBe(1);
    const failure = logger.lines.find((line) => line.message === 'pipeline failed');
    const command = 'storage-consumer replay network-metrics --partition 2 --to-offset 8 --allow-skip';
    expect(failure?.extra).toMatchObject({ pipeline: 'network-metrics', topic, partition: 2, first_offset: '3', last_offset: '7' });
    // The reason after 'cannot read:' is the client's own inflate error.
    const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    expect(String(failure?.extra.error)).toMatch(
      new RegExp(
        `^${escape(`pipeline network-metrics failed: topic ${topic} partition 2 holds a record batch compressed with gzip at offsets 3..7 that this host cannot read: `)}` +
          `.+; ${escape(`if Kafka's own clients cannot read it either, step over it with: ${command}`)}$`,
      ),
    );
    console.log(`[codecs] the unreadable-batch line: ${JSON.stringify({ message: failure?.message, ...failure?.extra })}`);
    expect(logger.lines.find((line) => line.message === 'Failing')?.extra).toMatchObject({
      topic,
      partition: 2,
      first_offset: '3',
      last_offset: '7',
    });
    expect((await committedOffsets(stack.admin, group, topic)).get(2)).toBe(3n);

    // Act: the printed command, then the host again with the batch still spoilt
    const replay = await runCli(command.split(' ').slice(1), env);
    expect(replay.code, replay.stderr).toBe(0);
    const after = host(names);
    expect(await after.handle.running).toBe(true);
    await waitForCommittedToEnd(stack.admin, group, topic);
    await after.handle.stop();

    // Assess: exactly the five records of the batch were stepped over
    const { rows } = await stack.schema.pool.query<{ analysis_id: string }>(
      'SELECT analysis_id FROM network_metrics WHERE analysis_id = ANY($1)',
      [[...sent.good, ...sent.skipped]],
    );
    expect(rows.map((row) => row.analysis_id).sort()).toEqual([...sent.good].sort());
    expect(sent.skipped).toHaveLength(5);
    expect(after.logger.lines.filter((line) => line.message === 'pipeline failed')).toEqual([]);
  });
});
