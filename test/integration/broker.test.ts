import { spawn } from 'node:child_process';
import { access, mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Kafka, logLevel } from 'kafkajs';
import type { KafkaMessage } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isAlive, waitForExit } from '../../dev/kafka/process.js';
import { installKafkajsWorkarounds } from '../../kafka/kafkajs/index.js';
import { TopicPartitionsError, describeTopics, ensureTopics } from '../../kafka/topics.js';
import { createTestTopics, produce, testBrokers, testKafka } from '../helpers/kafka.js';
import type { TestTopics } from '../helpers/kafka.js';
import { PIPELINE_NAMES } from '../../shared/pipelines.js';

// Every Kafka client reads (and writes) gzip, snappy, lz4 and zstd batches.
installKafkajsWorkarounds();

const REPO_ROOT = new URL('../../', import.meta.url).pathname;
const unique = (name: string): string => `broker-test-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}-${name}`;
const silent = { info: () => undefined, warn: () => undefined };

describe('the development broker', () => {
  it('does not auto-create a topic a client asks about', async () => {
    // Prepare
    const admin = new Kafka({ clientId: 'broker-test', brokers: testBrokers(), logLevel: logLevel.NOTHING }).admin();
    await admin.connect();
    const missing = unique('missing');

    try {
      // Act: kafkajs asks for metadata with allowAutoTopicCreation=true
      const lookup = admin.fetchTopicMetadata({ topics: [missing] });

      // Assess
      await expect(lookup).rejects.toThrow(/does not host this topic-partition/);
      expect(await admin.listTopics()).not.toContain(missing);
    } finally {
      await admin.disconnect();
    }
  });
});

describe('ensureTopics', () => {
  it('creates missing topics with their partitions, and a second call is a no-op', async () => {
    // Prepare
    const specs = [
      { topic: unique('app-stats'), partitions: 3 },
      { topic: unique('reviews'), partitions: 3 },
    ];

    // Act
    const first = await ensureTopics(testBrokers(), specs, { logger: silent });
    const second = await ensureTopics(testBrokers(), specs, { logger: silent });

    // Assess
    expect(first.created).toEqual(specs.map(({ topic }) => topic));
    expect(second.created).toEqual([]);
    expect(
      await describeTopics(
        testBrokers(),
        specs.map(({ topic }) => topic),
      ),
    ).toEqual(specs);
  });

  it('fails loudly on a topic with fewer partitions, naming topic, found and required', async () => {
    // Prepare: what a broker with auto-creation would have made
    const topic = unique('auto-created');
    await ensureTopics(testBrokers(), [{ topic, partitions: 1 }], { logger: silent });

    // Act
    const ensured = ensureTopics(testBrokers(), [{ topic, partitions: 3 }], { logger: silent });

    // Assess
    await expect(ensured).rejects.toThrow(TopicPartitionsError);
    await expect(ensured).rejects.toThrow(`topic "${topic}" has 1 partition(s), 3 required`);
    expect(await describeTopics(testBrokers(), [topic])).toEqual([{ topic, partitions: 1 }]);
  });

  it('accepts a topic with more partitions, with a warning', async () => {
    // Prepare
    const topic = unique('wide');
    await ensureTopics(testBrokers(), [{ topic, partitions: 6 }], { logger: silent });
    const warnings: string[] = [];

    // Act
    const result = await ensureTopics(testBrokers(), [{ topic, partitions: 3 }], {
      logger: { info: () => undefined, warn: (message) => warnings.push(message) },
    });

    // Assess
    expect(result).toEqual({ created: [], topics: [{ topic, partitions: 6 }] });
    expect(warnings).toEqual([expect.stringContaining(`topic "${topic}" has 6 partitions, 3 expected`)]);
  });

  it('reports a missing topic as null partitions', async () => {
    const topic = unique('absent');

    expect(await describeTopics(testBrokers(), [topic])).toEqual([{ topic, partitions: null }]);
  });
});

describe('produce and consume', () => {
  let topics: TestTopics;

  beforeAll(async () => {
    topics = await createTestTopics('broker-test');
  });

  it('creates one 3-partition topic per pipeline for the test file', async () => {
    const described = await describeTopics(testBrokers(), Object.values(topics));

    expect(described.map(({ partitions }) => partitions)).toEqual([3, 3, 3]);
    expect(Object.keys(topics)).toEqual(PIPELINE_NAMES);
  });

  it('delivers what was produced, with keys, headers, and one partition per key', async () => {
    // Prepare
    const sent = Array.from({ length: 12 }, (_, index) => ({
      key: `review-${index % 6}`,
      value: JSON.stringify({ index }),
      headers: { source: Buffer.from([0xff, 0x00, 0x7f]) },
    }));
    const consumer = testKafka().consumer({ groupId: unique('group') });
    // Keyed by coordinates: delivery is at-least-once, a rebalance may hand a record over twice.
    const received = new Map<string, KafkaMessage & { partition: number }>();

    // Act
    await produce(topics.reviews, sent);
    await consumer.connect();
    try {
      await consumer.subscribe({ topics: [topics.reviews], fromBeginning: true });
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`received ${received.size} of ${sent.length}`)), 60_000);
        void consumer.run({
          eachMessage: async ({ partition, message }) => {
            received.set(`${partition}:${message.offset}`, { ...message, partition });
            if (received.size === sent.length) {
              clearTimeout(timer);
              resolve();
            }
          },
        });
      });
    } finally {
      await consumer.disconnect();
    }

    // Assess
    const records = [...received.values()];
    const values = records.map((message) => JSON.parse(message.value?.toString() ?? 'null') as { index: number });
    expect(values.map(({ index }) => index).sort((a, b) => a - b)).toEqual(sent.map((_, index) => index));
    expect(records.map((message) => message.headers?.source)).toEqual(sent.map(() => Buffer.from([0xff, 0x00, 0x7f])));
    const partitionsOfKey = new Map<string, Set<number>>();
    for (const { key, partition } of records) {
      const name = key?.toString() ?? '';
      partitionsOfKey.set(name, (partitionsOfKey.get(name) ?? new Set()).add(partition));
    }
    expect([...partitionsOfKey.values()].every((partitions) => partitions.size === 1)).toBe(true);
    expect(new Set(records.map(({ partition }) => partition)).size).toBeGreaterThan(1);
  });
});

describe('the guardian', () => {
  const targets: number[] = [];

  afterAll(() => {
    for (const pid of targets) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone, as it should be
      }
    }
  });

  it('stops the broker process and removes its ephemeral folder when its starter is SIGKILLed', async () => {
    // Prepare: a stand-in for the JVM, and a starter that guards it, then dies without cleaning up
    const target = spawn('sleep', ['600'], { stdio: 'ignore' });
    targets.push(target.pid as number);
    const folder = await mkdtemp(join(tmpdir(), 'guardian-test-'));
    const starter = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        '-e',
        `import('./dev/kafka/process.ts').then(({ startGuardian }) => {
           startGuardian(${target.pid}, 5000, ${JSON.stringify(folder)});
           console.log('guarded');
           setInterval(() => undefined, 1000);
         });`,
      ],
      { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'inherit'] },
    );
    await new Promise<void>((resolve, reject) => {
      starter.once('error', reject);
      starter.stdout.on('data', (chunk: Buffer) => {
        if (chunk.toString().includes('guarded')) resolve();
      });
    });
    expect(await isAlive(target.pid as number)).toBe(true);

    // Act
    starter.kill('SIGKILL');

    // Assess
    expect(await waitForExit(target.pid as number, 10_000)).toBe(true);
    await expect(
      waitFor(
        () =>
          access(folder).then(
            () => false,
            () => true,
          ),
        10_000,
      ),
    ).resolves.toBe(true);
  });
});

async function waitFor(condition: () => Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return true;
}
