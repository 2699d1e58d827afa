/**
 * Fetching one partition straight from its leader without a group on kafkajs (kafka/port.ts
 * `PartitionFetcher`, reconcile's reads): a cluster of the client's own making (its private
 * `createCluster`, ./index.ts lists the internals), its broker's Fetch, and kafkajs' consumer
 * batch, which drops records below the fetch offset, aborted ones and control records. The
 * records come as the host's consumers get them (./source-record.ts, headers in wire order).
 */
import { createRequire } from 'node:module';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Kafka, KafkaMessage } from 'kafkajs';
import type { PartitionFetcher } from '../port.js';
import { PartitionRangeGoneError } from '../port.js';
import { toSourceRecord } from './source-record.js';
import { createClusterOf } from './topic-ids.js';

/** Bytes per fetch: a few thousand reviews, and a bound on what one fetch holds in memory. */
const FETCH_BYTES = 4 * 1024 * 1024;
/** How long the broker may wait for bytes before it answers a fetch. */
const FETCH_WAIT_MS = 250;
/** Fetches retried after a leadership change or a broken connection, before the read fails. */
const FETCH_RETRIES = 8;
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

/** A fetcher over a cluster of `kafka`'s own (connected at the first fetch). */
export function kafkajsPartitionFetcher(kafka: Kafka): PartitionFetcher {
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
    async fetch(topic, partition, offset) {
      const answer = await fetchOnce(topic, partition, offset);
      return {
        records: new Batch(topic, offset.toString(), answer).messages.map((message) => toSourceRecord(topic, partition, message)),
        next: nextOffset(answer, offset),
        highWatermark: BigInt(answer.highWatermark),
      };
    },
    async close() {
      if (clusterConnected) await cluster.disconnect();
    },
  };
}
