/**
 * Where a pipeline's consumer group stands on its topic, read from the broker: members,
 * committed and end offsets, lag. The host reads it for its lag metric and status endpoint,
 * the operations CLI for `lag`, `status`, `replay` and `verify`.
 */
import type { KafkaAdmin } from './port.js';
import { isUnknownTopic } from './port.js';

/** One member of a consumer group. */
export interface GroupMember {
  readonly memberId: string;
  readonly clientId: string;
  readonly clientHost: string;
  /** The partitions of the pipeline's topic assigned to the member (empty while the group rebalances). */
  readonly partitions: readonly number[];
}

/** One partition of a group's topic: where the group is and where the topic ends. */
export interface PartitionPosition {
  readonly partition: number;
  /** The committed offset (the next one to read); `null` when the group never committed. */
  readonly committed: bigint | null;
  /** The earliest offset still on the broker. */
  readonly start: bigint;
  /** The end (high watermark): the offset the next produced message gets. */
  readonly end: bigint;
  /** Messages the group has not consumed yet (from `start` when it never committed: a new group reads from the earliest). */
  readonly lag: bigint;
}

/** One pipeline's consumer group on its topic. */
export interface GroupPosition {
  readonly pipeline: string;
  readonly group: string;
  readonly topic: string;
  /** The coordinator's group state: Stable, Empty, PreparingRebalance, Dead (never existed) ... */
  readonly state: string;
  readonly members: readonly GroupMember[];
  readonly partitions: readonly PartitionPosition[];
  readonly lag: bigint;
}

/** The group's members and state, as the coordinator describes them. */
async function describeGroup(admin: KafkaAdmin, group: string, topic: string): Promise<{ state: string; members: GroupMember[] }> {
  const [described] = await admin.describeGroups([group]);
  return {
    state: described?.state ?? 'Unknown',
    members: (described?.members ?? []).map(({ memberId, clientId, clientHost, assignment }) => ({
      memberId,
      clientId,
      clientHost,
      partitions: [...(assignment[topic] ?? [])].sort((a, b) => a - b),
    })),
  };
}

/** The committed offset per partition; a partition without one is absent. */
export function committedOffsets(admin: KafkaAdmin, group: string, topic: string): Promise<Map<number, bigint>> {
  return admin.committedOffsets(group, topic);
}

/**
 * Where `group` reads each partition of `topic` now: its committed offset, or with none (a new
 * group, or a topic re-created: Kafka deletes a deleted topic's group offsets with it) the
 * partition's start, its earliest offset.
 */
export async function groupStartOffsets(
  admin: Pick<KafkaAdmin, 'committedOffsets' | 'partitionOffsets'>,
  group: string,
  topic: string,
): Promise<Map<number, string>> {
  const committed = await admin.committedOffsets(group, topic);
  const starts = new Map((await admin.partitionOffsets(topic)).map(({ partition, low }) => [partition, low]));
  for (const [partition, offset] of committed) starts.set(partition, offset.toString());
  return starts;
}

/** What a lag reading needs of a pipeline (its settings carry more). */
export interface GroupOfTopic {
  readonly name: string;
  readonly topic: string;
  readonly group: string;
}

/** The broker's answer for a topic it does not have, in words that name the topic. */
function namingMissingTopic(pipeline: GroupOfTopic) {
  return (error: unknown): never => {
    if (isUnknownTopic(error)) throw new Error(`topic ${pipeline.topic} of pipeline ${pipeline.name} does not exist`, { cause: error });
    throw error;
  };
}

/** Where one pipeline's group stands on its topic, partition by partition, and its members; a missing topic is named. */
export async function groupPosition(admin: KafkaAdmin, pipeline: GroupOfTopic): Promise<GroupPosition> {
  const [description, ends, committed] = await Promise.all([
    describeGroup(admin, pipeline.group, pipeline.topic),
    admin.partitionOffsets(pipeline.topic).catch(namingMissingTopic(pipeline)),
    committedOffsets(admin, pipeline.group, pipeline.topic).catch(namingMissingTopic(pipeline)),
  ]);
  const partitions = ends
    .map(({ partition, low, high }): PartitionPosition => {
      const start = BigInt(low);
      const end = BigInt(high);
      const position = committed.get(partition) ?? null;
      const from = position === null || position < start ? start : position;
      return { partition, committed: position, start, end, lag: end > from ? end - from : 0n };
    })
    .sort((a, b) => a.partition - b.partition);
  return {
    pipeline: pipeline.name,
    group: pipeline.group,
    topic: pipeline.topic,
    ...description,
    partitions,
    lag: partitions.reduce((sum, partition) => sum + partition.lag, 0n),
  };
}
