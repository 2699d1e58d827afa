/**
 * Reading a topic as it is, without a consumer group: where each partition starts and ends,
 * where a group has committed, the topic's id, and the records of one partition between two
 * offsets, fetched straight from the partition's leader. Nothing here joins a group or commits:
 * `storage-consumer reconcile` (cli/reconcile.ts) reads through it while the hosts consume.
 * It reads through the port (kafka/port.ts) on the client the settings name; the records come
 * as that client's consumers hand them to the host (headers in wire order, aborted transactions
 * and control records left out), so the same event builder and decoder make of them what a batch would.
 */
import type { SourceRecord } from '../shared/kafka-event-builder.js';
import { createKafkaClient } from './clients.js';
import type { KafkaSettings } from './settings.js';

export { PartitionRangeGoneError } from './port.js';

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

/** Empty answers below the range's end in a row (an open transaction holds the stable offset back) before the read fails. */
const EMPTY_FETCHES = 40;

/**
 * A reader over a Kafka client of its own, of the kind the settings name (the host's brokers,
 * TLS and SASL): its admin, its topic id reader and its partition fetcher (kafka/port.ts).
 */
export async function kafkaPartitionReader(settings: KafkaSettings, clientSuffix = 'reconcile'): Promise<PartitionReader> {
  const client = createKafkaClient(settings, { clientId: `${settings.clientId}-${clientSuffix}`, retries: 3 });
  const admin = client.admin();
  await admin.connect();
  const topicIds = client.topicIds();
  const fetcher = client.partitionFetcher();

  return {
    async bounds(topic, group) {
      const [ends, committed, identity] = await Promise.all([
        admin.partitionOffsets(topic),
        admin.committedOffsets(group, topic),
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
      const found = await admin.offsetsAtTime(topic, at.getTime());
      return new Map(found.map(({ partition, offset }) => [partition, BigInt(offset)]));
    },
    async *read(topic, partition, from, to) {
      let offset = from;
      let empty = 0;
      while (offset < to) {
        const answer = await fetcher.fetch(topic, partition, offset);
        const records = answer.records.filter((record) => BigInt(record.offset) < to);
        if (answer.next <= offset) {
          empty += 1;
          if (empty > EMPTY_FETCHES)
            throw new Error(
              `${topic}-${partition} answers no records at offset ${offset} below ${to} (its high watermark is ${answer.highWatermark}): ` +
                'an open transaction may hold the stable offset back',
            );
          continue;
        }
        empty = 0;
        offset = answer.next;
        if (records.length > 0) yield records;
      }
    },
    async close() {
      await Promise.allSettled([admin.disconnect(), topicIds.close(), fetcher.close()]);
    },
  };
}
