/**
 * Reading a topic as it is, without a consumer group: where each partition starts and ends,
 * where a group has committed, the topic's id, and the records of one partition between two
 * offsets, fetched straight from the partition's leader. Nothing here joins a group or commits:
 * `storage-consumer reconcile` (cli/reconcile.ts) reads through it while the hosts consume.
 * The records come as the host's consumers get them (kafka/kafkajs/source-record.ts, headers in wire
 * order, aborted transactions and control records left out), so the same event builder and
 * decoder make of them what a batch would.
 */
import { createRequire } from 'node:module';
import { setTimeout as sleep } from 'node:timers/promises';
import { logLevel } from 'kafkajs';
import type { Admin, Kafka, KafkaMessage } from 'kafkajs';
import type { SourceRecord } from '../shared/kafka-event-builder.js';
import { kafkajsAdmin } from './kafkajs/admin.js';
import { createKafka } from './kafkajs/connection.js';
import { createClusterOf, kafkajsTopicIds } from './kafkajs/topic-ids.js';
import type { KafkaSettings } from './settings.js';
import { toSourceRecord } from './kafkajs/source-record.js';

/** One partition as it stands when read: its log start and end, and the group's committed offset. */
export interface PartitionBounds {
  readonly partition: number;
  /** The earliest offset still on the broker (retention or deleted records moved it up from 0). */
  readonly start: bigint;
  /** The high watermark: the offset the next record gets. */
  readonly end: bigint;
  /** The group's committed offset; `null` when it has none on this partition. */
  readonly committed: bigint | null;
}

/** A topic as it stands when read, for one group. */
export interface TopicBounds {
  readonly topic: string;
  /** Kafka's topic id (new when the topic is re-created); `undefined` when the broker cannot tell. */
  readonly id: string | undefined;
  /** Why the id could not be read, when it could not. */
  readonly idError?: string;
  readonly partitions: readonly PartitionBounds[];
}

/** The records a partition no longer holds: retention or a deletion moved its start past `offset`. */
export class PartitionRangeGoneError extends Error {
  constructor(
    readonly topic: string,
    readonly partition: number,
    readonly offset: bigint,
    options?: { cause?: unknown },
  ) {
    super(`offset ${offset} of ${topic}-${partition} is no longer on the broker (retention or deleted records)`, options);
    this.name = 'PartitionRangeGoneError';
  }
}

/** What reads a topic without a consumer group. */
export interface PartitionReader {
  /** The topic's id and, per partition, its start, its end and `group`'s committed offset, read now. */
  bounds(topic: string, group: string): Promise<TopicBounds>;
  /** Per partition, the first offset whose record's timestamp is at or after `at`; the end when there is none. */
  offsetsAt(topic: string, at: Date): Promise<Map<number, bigint>>;
  /**
   * The records of one partition from `from` up to (not including) `to`, one fetch at a time.
   * @throws PartitionRangeGoneError when the broker no longer holds an offset still to read.
   */
  read(topic: string, partition: number, from: bigint, to: bigint): AsyncIterable<SourceRecord[]>;
  close(): Promise<void>;
}

/** Bytes per fetch: a few thousand reviews, and a bound on what one fetch holds in memory. */
const FETCH_BYTES = 4 * 1024 * 1024;
/** How long the broker may wait for bytes before it answers a fetch. */
const FETCH_WAIT_MS = 250;
/** Fetches retried after a leadership change or a broken connection, before the read fails. */
const FETCH_RETRIES = 8;
/** Empty answers below the range's end in a row (an open transaction holds the stable offset back) before the read fails. */
const EMPTY_FETCHES = 40;
/** kafkajs' `READ_COMMITTED`: what the host's consumers read (aborted transactions are left out). */
const READ_COMMITTED = 1;
/** Errors after which the partition's leader is looked up again. */
const LEADERSHIP_ERRORS = new Set([
  'NOT_LEADER_FOR_PARTITION',
  'NOT_LEADER_OR_FOLLOWER',
  'LEADER_NOT_AVAILABLE',
  'UNKNOWN_TOPIC_OR_PARTITION',
  'FENCED_LEADER_EPOCH',
  'UNKNOWN_LEADER_EPOCH',
  'REPLICA_NOT_AVAILABLE',
]);

interface FetchedPartition {
  readonly partition: number;
  readonly highWatermark: string;
  readonly messages: ReadonlyArray<KafkaMessage & { readonly batchContext?: { firstOffset: string; lastOffsetDelta: number } }>;
}
interface KafkajsBroker {
  fetch(request: {
    replicaId?: number;
    isolationLevel: number;
    maxWaitTime: number;
    minBytes: number;
    maxBytes: number;
    topics: Array<{ topic: string; partitions: Array<{ partition: number; fetchOffset: string; maxBytes: number }> }>;
  }): Promise<{ responses: Array<{ topicName: string; partitions: FetchedPartition[] }> }>;
}
interface KafkajsCluster {
  connect(): Promise<void>;
  disconnect(): Promise<void>;
  addTargetTopic(topic: string): Promise<void>;
  refreshMetadata(): Promise<void>;
  findLeaderForPartitions(topic: string, partitions: number[]): Record<string, number[]>;
  findBroker(node: { nodeId: string }): Promise<KafkajsBroker>;
}
/** kafkajs' consumer batch (`kafkajs/src/consumer/batch.js`): drops records below the fetch offset, aborted ones and control records. */
type BatchOf = new (topic: string, fetchedOffset: string, partitionData: FetchedPartition) => { readonly messages: KafkaMessage[] };

const require = createRequire(import.meta.url);

function consumerBatch(): BatchOf {
  return require('kafkajs/src/consumer/batch.js') as BatchOf;
}

/**
 * The next offset to fetch after an answer: past the last record batch it held (its base offset
 * plus its last offset delta: records compacted away or a transaction marker at its end count),
 * else past its last record.
 */
function nextOffset(partition: FetchedPartition, fetched: bigint): bigint {
  let next = fetched;
  for (const message of partition.messages) {
    const context = message.batchContext;
    const after = context === undefined ? BigInt(message.offset) + 1n : BigInt(context.firstOffset) + BigInt(context.lastOffsetDelta) + 1n;
    if (after > next) next = after;
  }
  return next;
}

function errorType(error: unknown): string | undefined {
  const type = (error as { type?: unknown } | null)?.type;
  return typeof type === 'string' ? type : undefined;
}

/** A reader over its own Kafka client (the host's brokers, TLS and SASL): one admin, one cluster of its own. */
export async function kafkaPartitionReader(settings: KafkaSettings, clientSuffix = 'reconcile'): Promise<PartitionReader> {
  const kafka: Kafka = createKafka(settings, {
    clientId: `${settings.clientId}-${clientSuffix}`,
    logLevel: logLevel.NOTHING,
    retry: { retries: 3 },
  });
  const admin: Admin = kafka.admin();
  await admin.connect();
  const topicIds = kafkajsTopicIds(kafka);
  const cluster = createClusterOf(kafka)({ allowAutoTopicCreation: false }) as unknown as KafkajsCluster;
  let clusterConnected = false;
  const Batch = consumerBatch();

  const leader = async (topic: string, partition: number): Promise<KafkajsBroker> => {
    if (!clusterConnected) {
      await cluster.connect();
      clusterConnected = true;
    }
    await cluster.addTargetTopic(topic);
    const [nodeId] = Object.entries(cluster.findLeaderForPartitions(topic, [partition])).find(([, partitions]) =>
      partitions.includes(partition),
    ) ?? [undefined];
    if (nodeId === undefined) throw Object.assign(new Error(`no leader known for ${topic}-${partition}`), { type: 'LEADER_NOT_AVAILABLE' });
    return cluster.findBroker({ nodeId });
  };

  const fetchOnce = async (topic: string, partition: number, offset: bigint): Promise<FetchedPartition> => {
    for (let attempt = 0; ; attempt += 1) {
      try {
        const broker = await leader(topic, partition);
        const { responses } = await broker.fetch({
          isolationLevel: READ_COMMITTED,
          maxWaitTime: FETCH_WAIT_MS,
          minBytes: 1,
          maxBytes: FETCH_BYTES,
          topics: [{ topic, partitions: [{ partition, fetchOffset: offset.toString(), maxBytes: FETCH_BYTES }] }],
        });
        const answer = responses.find((response) => response.topicName === topic)?.partitions.find((p) => p.partition === partition);
        if (answer === undefined) throw new Error(`the broker's fetch answer holds no ${topic}-${partition}`);
        return answer;
      } catch (error) {
        if (errorType(error) === 'OFFSET_OUT_OF_RANGE') throw new PartitionRangeGoneError(topic, partition, offset, { cause: error });
        const retriable =
          LEADERSHIP_ERRORS.has(errorType(error) ?? '') || /Connection|BrokerNotFound|LockTimeout|RequestTimeout/.test(String(error));
        if (!retriable || attempt >= FETCH_RETRIES) throw error;
        await sleep(250 * (attempt + 1));
        await cluster.refreshMetadata().catch(() => undefined);
      }
    }
  };

  return {
    async bounds(topic, group) {
      const [ends, committed, identity] = await Promise.all([
        admin.fetchTopicOffsets(topic),
        kafkajsAdmin(admin).committedOffsets(group, topic),
        topicIds.read([topic]).then(
          ([found]) => ({ id: found?.id, idError: undefined }),
          (error: unknown) => ({ id: undefined, idError: error instanceof Error ? error.message : String(error) }),
        ),
      ]);
      const partitions = ends
        .map(({ partition, low, high }) => ({
          partition,
          start: BigInt(low),
          end: BigInt(high),
          committed: committed.get(partition) ?? null,
        }))
        .sort((a, b) => a.partition - b.partition);
      return { topic, id: identity.id, ...(identity.idError === undefined ? {} : { idError: identity.idError }), partitions };
    },
    async offsetsAt(topic, at) {
      const found = await admin.fetchTopicOffsetsByTimestamp(topic, at.getTime());
      const ends = new Map((await admin.fetchTopicOffsets(topic)).map(({ partition, high }) => [partition, BigInt(high)]));
      return new Map(
        found.map(({ partition, offset }) => {
          const value = BigInt(offset);
          return [partition, value < 0n ? (ends.get(partition) ?? 0n) : value];
        }),
      );
    },
    async *read(topic, partition, from, to) {
      let offset = from;
      let empty = 0;
      while (offset < to) {
        const answer = await fetchOnce(topic, partition, offset);
        const next = nextOffset(answer, offset);
        const records = new Batch(topic, offset.toString(), answer).messages
          .filter((message) => BigInt(message.offset) < to)
          .map((message) => toSourceRecord(topic, partition, message));
        if (next === offset) {
          empty += 1;
          if (empty > EMPTY_FETCHES)
            throw new Error(
              `${topic}-${partition} answers no records at offset ${offset} below ${to} (its high watermark is ${answer.highWatermark}): ` +
                'an open transaction may hold the stable offset back',
            );
          continue;
        }
        empty = 0;
        offset = next;
        if (records.length > 0) yield records;
      }
    },
    async close() {
      await Promise.allSettled([admin.disconnect(), topicIds.close(), clusterConnected ? cluster.disconnect() : Promise.resolve()]);
    },
  };
}
