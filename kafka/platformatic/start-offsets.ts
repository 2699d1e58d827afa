/**
 * Where the platformatic consumer (./partition-fetcher.ts) starts a partition: at every join from
 * the group's committed offset, and where there is none, or where a position fell out of the log
 * (OFFSET_OUT_OF_RANGE), from the earliest offset when the subscription reads from the beginning,
 * else from the end (Kafka's `auto.offset.reset`, as kafkajs' `fromBeginning` sets it).
 */
import { ListOffsetTimestamps } from '@platformatic/kafka';
import type { Consumer } from '@platformatic/kafka';

/** Per partition, the earliest offset or the end, as `fromBeginning` says. */
export async function resetOffsets(
  consumer: Consumer,
  topic: string,
  partitions: readonly number[],
  fromBeginning: boolean,
): Promise<Map<number, bigint>> {
  const starts = new Map<number, bigint>();
  if (partitions.length === 0) return starts;
  const listed = await consumer.listOffsets({
    topics: [topic],
    partitions: { [topic]: [...partitions] },
    timestamp: fromBeginning ? ListOffsetTimestamps.EARLIEST : ListOffsetTimestamps.LATEST,
  });
  const offsets = listed.get(topic) ?? [];
  for (const partition of partitions) {
    const offset = offsets[partition];
    if (offset !== undefined) starts.set(partition, offset);
  }
  return starts;
}

/** Per partition, the group's committed offset, else the reset offset. */
export async function startOffsets(
  consumer: Consumer,
  topic: string,
  partitions: readonly number[],
  fromBeginning: boolean,
): Promise<Map<number, bigint>> {
  const committed = (await consumer.listCommittedOffsets({ topics: [{ topic, partitions: [...partitions] }] })).get(topic) ?? [];
  const starts = await resetOffsets(
    consumer,
    topic,
    partitions.filter((partition) => (committed[partition] ?? -1n) < 0n),
    fromBeginning,
  );
  for (const partition of partitions) {
    const offset = committed[partition] ?? -1n;
    if (offset >= 0n) starts.set(partition, offset);
  }
  return starts;
}
