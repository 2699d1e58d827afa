/**
 * The integration run's Kafka, for test files. The global setup starts ONE broker for the whole
 * run (or takes `KAFKA_BROKERS`) and provides its address; every test file creates its own
 * uniquely named topics, so files running side by side never read each other's messages.
 */
import { randomBytes } from 'node:crypto';
import { Kafka, Partitioners, logLevel } from 'kafkajs';
import type { Message, RecordMetadata } from 'kafkajs';
import { inject } from 'vitest';
import { installKafkajsWorkarounds } from '../../kafka/kafkajs/index.js';
import { TOPIC_PARTITIONS, ensureTopics } from '../../kafka/topics.js';
import { PIPELINE_NAMES } from '../../shared/pipelines.js';
import type { PipelineName } from '../../shared/pipelines.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Bootstrap brokers of the integration run's Kafka (set by test/helpers/global-setup.ts). */
    kafkaBrokers: string[];
  }
}

// kafkajs sends one record batch per partition per request, and the broker refuses a batch over
// message.max.bytes (1 MB by default): large inputs go in several requests.
const CHUNK_RECORDS = 500;
const CHUNK_BYTES = 512 * 1024;

/** The bootstrap brokers of the run's Kafka, as kafkajs takes them. */
export function testBrokers(): string[] {
  const brokers = inject('kafkaBrokers');
  if (!Array.isArray(brokers) || brokers.length === 0) {
    throw new Error('No Kafka brokers were provided: run this file in the "integration" vitest project, whose global setup starts Kafka');
  }
  return [...brokers];
}

/** A kafkajs client on the run's Kafka that logs errors only. */
export function testKafka(clientId = 'integration-test'): Kafka {
  // Every Kafka client reads (and writes) gzip, snappy, lz4 and zstd batches.
  installKafkajsWorkarounds();
  return new Kafka({ clientId, brokers: testBrokers(), logLevel: logLevel.ERROR });
}

/** What `ensureTopics` says while tests create their topics: warnings only. */
const TOPIC_LOGGER = { info: () => undefined, warn: (message: string) => console.warn(message) };

/** One test file's topics: a unique name per pipeline. */
export type TestTopics = Readonly<Record<PipelineName, string>>;

/**
 * Creates one topic per pipeline, named `<prefix>-<random>-<pipeline>`, with 3 partitions each,
 * exactly as production provisioning does (through `ensureTopics`).
 */
export async function createTestTopics(prefix: string): Promise<TestTopics> {
  const run = `${prefix.replace(/[^a-zA-Z0-9-]/g, '-')}-${randomBytes(4).toString('hex')}`;
  const topics = Object.fromEntries(PIPELINE_NAMES.map((pipeline) => [pipeline, `${run}-${pipeline}`])) as Record<PipelineName, string>;
  await ensureTopics(
    testBrokers(),
    PIPELINE_NAMES.map((pipeline) => ({ topic: topics[pipeline], partitions: TOPIC_PARTITIONS })),
    { logger: TOPIC_LOGGER },
  );
  return Object.freeze(topics);
}

/**
 * Creates `topic` with `partitions` partitions (on the run's Kafka unless `brokers` says) through
 * `ensureTopics`, as production provisioning does, and resolves once the broker's metadata shows
 * it. kafkajs' own `createTopics({ waitForLeaders: true })` retries only LEADER_NOT_AVAILABLE and
 * throws the UNKNOWN_TOPIC_OR_PARTITION a loaded KRaft broker answers for a moment after a creation.
 */
export async function createTestTopic(topic: string, partitions: number, brokers: string[] = testBrokers()): Promise<void> {
  await ensureTopics(brokers, [{ topic, partitions }], { logger: TOPIC_LOGGER });
}

/**
 * Produces `messages` to `topic` (acks from all in-sync replicas) and resolves once the broker
 * has them all. A message without `partition` goes where its key hashes, as with the Java client.
 */
export async function produce(topic: string, messages: readonly Message[]): Promise<RecordMetadata[]> {
  const producer = testKafka('integration-test-producer').producer({
    createPartitioner: Partitioners.DefaultPartitioner,
    allowAutoTopicCreation: false,
    // A retried send must not write a batch twice (seen under load): tests count what they produced.
    idempotent: true,
    maxInFlightRequests: 1,
  });
  await producer.connect();
  try {
    const written: RecordMetadata[] = [];
    for (const chunk of chunks(messages)) {
      written.push(...(await producer.send({ topic, acks: -1, messages: chunk })));
    }
    return written;
  } finally {
    await producer.disconnect();
  }
}

function* chunks(messages: readonly Message[]): Generator<Message[]> {
  let chunk: Message[] = [];
  let bytes = 0;
  for (const message of messages) {
    const size = byteLength(message.value) + byteLength(message.key);
    if (chunk.length > 0 && (chunk.length >= CHUNK_RECORDS || bytes + size > CHUNK_BYTES)) {
      yield chunk;
      chunk = [];
      bytes = 0;
    }
    chunk.push(message);
    bytes += size;
  }
  if (chunk.length > 0) yield chunk;
}

function byteLength(data: Buffer | string | null | undefined): number {
  return data == null ? 0 : Buffer.byteLength(data);
}
