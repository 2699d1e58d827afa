/**
 * Reading one partition without a group on `@platformatic/kafka` (kafka/port.ts
 * `PartitionFetcher` for reconcile, `PartitionReader` for the CLI's peek): a consumer that never
 * joins a group sends Fetch requests through its public `fetch` to the partition's leader, found
 * in the public metadata, reading committed data only; ./records.ts makes the answer the
 * records the host's consumers would get. Nothing joins a group, nothing commits.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Consumer, FetchIsolationLevels } from '@platformatic/kafka';
import type { BaseOptions, ClusterTopicMetadata } from '@platformatic/kafka';
import type { SourceRecord } from '../../shared/kafka-event-builder.js';
import { TIMED_OUT, within } from '../../shared/timeout.js';
import type { FetchedRange, PartitionFetcher, PartitionReader } from '../port.js';
import { PartitionRangeGoneError, UnknownTopicError } from '../port.js';
import { protocolErrorIds } from './errors.js';
import { topicMetadata } from './metadata.js';
import { sourceRecords } from './records.js';

/** Bytes per fetch: a few thousand reviews, and a bound on what one fetch holds in memory. */
const FETCH_BYTES = 4 * 1024 * 1024;
/** How long the broker may wait for bytes before it answers a fetch. */
const FETCH_WAIT_MS = 250;
/** Fetches retried after a leadership change or a broken connection, before the read fails. */
const FETCH_RETRIES = 8;
/** Errors after which the partition's leader is looked up again. */
const LEADERSHIP_ERRORS = [
  'NOT_LEADER_OR_FOLLOWER',
  'LEADER_NOT_AVAILABLE',
  'UNKNOWN_TOPIC_OR_PARTITION',
  'UNKNOWN_TOPIC_ID',
  'FENCED_LEADER_EPOCH',
  'UNKNOWN_LEADER_EPOCH',
  'REPLICA_NOT_AVAILABLE',
];

function retriable(error: unknown): boolean {
  const ids = protocolErrorIds(error);
  return LEADERSHIP_ERRORS.some((id) => ids.has(id)) || /PLT_KFK_(NETWORK|TIMEOUT)|Connection|ECONN/.test(String(error));
}

/** A fetcher over a consumer of its own that never joins its (unused) group; connected at the first fetch. */
export function platformaticPartitionFetcher(options: BaseOptions): PartitionFetcher {
  let consumer: Consumer | undefined;
  const client = (): Consumer => (consumer ??= new Consumer({ ...options, groupId: `${options.clientId}-no-group` }));
  const topics = new Map<string, ClusterTopicMetadata>();

  const describe = async (topic: string, fresh: boolean): Promise<ClusterTopicMetadata> => {
    const known = fresh ? undefined : topics.get(topic);
    if (known !== undefined) return known;
    const found = await topicMetadata(client(), topic);
    if (found === undefined) throw new UnknownTopicError(topic);
    topics.set(topic, found);
    return found;
  };

  const fetchOnce = async (topic: string, partition: number, offset: bigint, fresh: boolean): Promise<FetchedRange> => {
    const described = await describe(topic, fresh);
    const leader = described.partitions[partition]?.leader ?? -1;
    if (leader < 0) throw Object.assign(new Error(`no leader known for ${topic}-${partition}`), { apiId: 'LEADER_NOT_AVAILABLE' });
    const answer = await client().fetch({
      node: leader,
      isolationLevel: FetchIsolationLevels.READ_COMMITTED,
      maxWaitTime: FETCH_WAIT_MS,
      minBytes: 1,
      maxBytes: FETCH_BYTES,
      topics: [
        {
          topicId: described.id,
          partitions: [{ partition, currentLeaderEpoch: -1, fetchOffset: offset, lastFetchedEpoch: -1, partitionMaxBytes: FETCH_BYTES }],
        },
      ],
    });
    const found = answer.responses.flatMap((response) => response.partitions).find((one) => one.partitionIndex === partition);
    // The client keeps a fetch session (KIP-227): an answer without news of the partition leaves it out.
    if (found === undefined) return { records: [], next: offset, highWatermark: -1n };
    const { records, lastOffset } = sourceRecords(topic, partition, found.records ?? [], offset, found.abortedTransactions ?? []);
    return { records, next: lastOffset !== null && lastOffset >= offset ? lastOffset + 1n : offset, highWatermark: found.highWatermark };
  };

  return {
    async fetch(topic, partition, offset) {
      for (let attempt = 0; ; attempt += 1) {
        try {
          return await fetchOnce(topic, partition, offset, attempt > 0);
        } catch (error) {
          if (protocolErrorIds(error).has('OFFSET_OUT_OF_RANGE'))
            throw new PartitionRangeGoneError(topic, partition, offset, { cause: error });
          if (!retriable(error) || attempt >= FETCH_RETRIES) throw error;
          await sleep(250 * (attempt + 1));
        }
      }
    },
    async close() {
      const current = consumer;
      consumer = undefined;
      await current?.close();
    },
  };
}

/** A peek reader: each read on a fetcher of its own, closed when the read ends. */
export function platformaticPartitionReader(options: BaseOptions): PartitionReader {
  return {
    async read({ topic, partition, offset, count, end, timeoutMs }) {
      const fetcher = platformaticPartitionFetcher(options);
      const records: SourceRecord[] = [];
      const deadline = performance.now() + timeoutMs;
      let next = offset;
      try {
        while (records.length < count && next < end) {
          const left = deadline - performance.now();
          const answer = left > 0 ? await within(fetcher.fetch(topic, partition, next), left) : TIMED_OUT;
          if (answer === TIMED_OUT) return { records, complete: false };
          records.push(...answer.records.filter((record) => BigInt(record.offset) < end).slice(0, count - records.length));
          next = answer.next;
        }
        return { records, complete: true };
      } finally {
        await fetcher.close().catch(() => undefined);
      }
    },
  };
}
