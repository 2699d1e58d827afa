/**
 * Topic provisioning: every pipeline's topic exists with (at least) 3 partitions each, created
 * explicitly. A topic the broker auto-created has 1 partition, and a partition count can never be
 * lowered, so a topic with too few partitions is reported loudly instead of being consumed at a
 * third of its intended parallelism.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { StorageConsumerError } from '../shared/errors.js';
import type { CoreLogger } from '../shared/logger.js';
import { PIPELINES, PIPELINE_NAMES } from '../shared/pipelines.js';
import { createKafkaClient } from './clients.js';
import { plaintextKafka } from './connection.js';
import type { KafkaAdmin } from './port.js';
import { isUnknownTopic } from './port.js';
import type { KafkaSettings } from './settings.js';

/** Partitions per topic (docs/design.md section 1): up to 3 active consumers per group. */
export const TOPIC_PARTITIONS = 3;

/** One topic and the partition count it needs. */
export interface TopicSpec {
  readonly topic: string;
  readonly partitions: number;
}

/** The default topics (`app-stats`, `reviews`, `network-metrics`), 3 partitions each. */
const DEFAULT_TOPICS: readonly TopicSpec[] = Object.freeze(
  PIPELINE_NAMES.map((pipeline) => Object.freeze({ topic: PIPELINES[pipeline].topic, partitions: TOPIC_PARTITIONS })),
);

/** A topic as the cluster has it. */
export interface TopicDescription {
  readonly topic: string;
  /** The partition count, or `null` when the topic does not exist. */
  readonly partitions: number | null;
}

/** What {@link ensureTopics} did. */
export interface EnsureTopicsResult {
  /** Topics this call created (empty when they all existed: the call was a no-op). */
  readonly created: readonly string[];
  /** Every requested topic as it is now. */
  readonly topics: readonly TopicDescription[];
}

/**
 * A connected admin (kafka/port.ts), or a cluster to connect to for the duration of the call: the
 * host's Kafka settings (TLS, SASL), or a plaintext broker list (the dev stack, tests).
 */
export type AdminTarget = KafkaAdmin | KafkaSettings | readonly string[];

/** Options of {@link ensureTopics}. */
export interface EnsureTopicsOptions {
  /** Told about created topics (info) and wider-than-required ones (warn); default: the console. */
  readonly logger?: Pick<CoreLogger, 'info' | 'warn'>;
}

/** A topic cannot serve its pipeline: it has fewer partitions than required (or vanished). */
export class TopicPartitionsError extends StorageConsumerError {
  constructor(readonly problems: readonly { topic: string; found: number | null; required: number }[]) {
    super(
      problems
        .map(({ topic, found, required }) =>
          found === null
            ? `topic "${topic}" does not exist after it was created (required: ${required} partitions)`
            : `topic "${topic}" has ${found} partition(s), ${required} required; partitions can be added ` +
              `(kafka-topics --alter --partitions ${required}, which moves keys to other partitions) but never removed`,
        )
        .join('; '),
    );
    this.name = 'TopicPartitionsError';
  }
}

/**
 * Creates the missing topics with their partition count and checks the existing ones.
 * Idempotent: a second call creates nothing. Safe when several processes call it at once (a
 * topic someone else created in between counts as existing and is checked like any other).
 * The replication factor is the cluster's `default.replication.factor`.
 *
 * @throws TopicPartitionsError when a topic has fewer partitions than required (all such topics
 *   are named, with the count found and the count required). More partitions than required are
 *   accepted with a warning.
 */
export async function ensureTopics(
  target: AdminTarget,
  topics: readonly TopicSpec[] = DEFAULT_TOPICS,
  options: EnsureTopicsOptions = {},
): Promise<EnsureTopicsResult> {
  const wanted = distinct(topics);
  const logger = options.logger ?? console;
  return withAdmin(target, async (admin) => {
    const names = wanted.map(({ topic }) => topic);
    const missing = (await describeWith(admin, names)).filter(({ partitions }) => partitions === null);
    const created: string[] = [];
    if (missing.length > 0) {
      const specs = wanted.filter(({ topic }) => missing.some((gap) => gap.topic === topic));
      // False (not an error) when another process created them first; they are checked below.
      const didCreate = await admin.createTopics(specs.map(({ topic, partitions }) => ({ topic, partitions }))).catch((error: unknown) => {
        // A client waits for leaders but may retry only LEADER_NOT_AVAILABLE; a loaded broker may
        // still answer "unknown topic" for a topic it has just created. The check below waits.
        if (isUnknownTopic(error)) return true;
        throw error;
      });
      if (didCreate) {
        created.push(...specs.map(({ topic }) => topic));
        logger.info('created topics', { topics: specs.map(({ topic, partitions }) => ({ topic, partitions })) });
      }
    }

    let current = await describeWith(admin, names);
    // A topic just created may take a moment to show up in the broker's metadata.
    const deadline = performance.now() + METADATA_WAIT_MS;
    while (missing.length > 0 && current.some(({ partitions }) => partitions === null) && performance.now() < deadline) {
      await sleep(200);
      current = await describeWith(admin, names);
    }
    const problems = wanted.flatMap(({ topic, partitions: required }) => {
      const found = current.find((description) => description.topic === topic)?.partitions ?? null;
      return found === null || found < required ? [{ topic, found, required }] : [];
    });
    if (problems.length > 0) throw new TopicPartitionsError(problems);
    for (const { topic, partitions: required } of wanted) {
      const found = current.find((description) => description.topic === topic)?.partitions ?? required;
      if (found > required) {
        logger.warn(
          `topic "${topic}" has ${found} partitions, ${required} expected; accepted (more consumers can be active than planned)`,
          { topic, found, required },
        );
      }
    }
    return { created, topics: current };
  });
}

/**
 * The partition count of each named topic, in the order given; `partitions` is `null` for a
 * topic that does not exist. For the operator's `verify` command.
 */
export async function describeTopics(target: AdminTarget, topics: readonly string[]): Promise<TopicDescription[]> {
  return withAdmin(target, (admin) => describeWith(admin, topics));
}

/** How long a topic the broker lists may take to appear in its metadata (a loaded broker lags). */
const METADATA_WAIT_MS = 30_000;

async function describeWith(admin: KafkaAdmin, topics: readonly string[]): Promise<TopicDescription[]> {
  const deadline = performance.now() + METADATA_WAIT_MS;
  for (;;) {
    const existing = new Set(await admin.listTopics());
    const present = topics.filter((topic) => existing.has(topic));
    try {
      const counts = await admin.topicPartitions(present);
      return topics.map((topic) => ({ topic, partitions: counts.get(topic) ?? null }));
    } catch (error) {
      if (!isUnknownTopic(error) || performance.now() > deadline) throw error;
      await sleep(200);
    }
  }
}

async function withAdmin<T>(target: AdminTarget, use: (admin: KafkaAdmin) => Promise<T>): Promise<T> {
  if (!isCluster(target)) return use(target);
  const kafka = isBrokerList(target) ? plaintextKafka(target) : target;
  const admin = createKafkaClient(kafka, { clientId: `${kafka.clientId}-topics` }).admin();
  await admin.connect();
  try {
    return await use(admin);
  } finally {
    await admin.disconnect();
  }
}

function isBrokerList(target: AdminTarget): target is readonly string[] {
  return Array.isArray(target);
}

function isCluster(target: AdminTarget): target is KafkaSettings | readonly string[] {
  return isBrokerList(target) || 'brokers' in target;
}

/** The specs without repeats; a topic listed twice with different counts is a caller's error. */
function distinct(topics: readonly TopicSpec[]): TopicSpec[] {
  const seen = new Map<string, number>();
  for (const { topic, partitions } of topics) {
    if (topic.length === 0) throw new RangeError('a topic name is empty');
    if (!Number.isInteger(partitions) || partitions < 1) {
      throw new RangeError(`topic "${topic}": partitions must be a positive integer, got ${partitions}`);
    }
    const before = seen.get(topic);
    if (before !== undefined && before !== partitions) {
      throw new RangeError(`topic "${topic}" is listed twice, with ${before} and ${partitions} partitions`);
    }
    seen.set(topic, partitions);
  }
  return [...seen].map(([topic, partitions]) => ({ topic, partitions }));
}
