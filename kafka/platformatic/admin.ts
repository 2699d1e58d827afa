/**
 * The admin port (kafka/port.ts) on `@platformatic/kafka`'s `Admin`: its public methods only.
 * Member assignments come decoded by the client; a missing topic is an `UnknownTopicError`, a
 * reset the coordinator refuses because the group has members a `GroupNotEmptyError`, as on kafkajs.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Admin } from '@platformatic/kafka';
import type { AdminOptions, ClusterTopicMetadata } from '@platformatic/kafka';
import type { DescribedGroup, KafkaAdmin } from '../port.js';
import { GroupNotEmptyError, UnknownTopicError } from '../port.js';
import { protocolErrorIds } from './errors.js';
import { partitionsOf, topicMetadata } from './metadata.js';

/** Kafka's timestamps for "the earliest offset" and "the end" in a ListOffsets request. */
const EARLIEST = -2n;
const LATEST = -1n;
/** How long created topics may take to get their leaders, and how often they are looked at meanwhile. */
const LEADERS_WAIT_MS = 30_000;
const LEADERS_POLL_MS = 100;
/**
 * The coordinator's answers to an offset commit from outside a group that has members: the
 * admin is no member of it (a classic group), or the group is not empty (Kafka's newer coordinator).
 */
const MEMBERS_PRESENT = ['UNKNOWN_MEMBER_ID', 'ILLEGAL_GENERATION', 'REBALANCE_IN_PROGRESS', 'GROUP_NOT_EMPTY'];

/** The port over a platformatic admin with `options` (connected by `connect`, closed by `disconnect`). */
export function platformaticAdmin(options: AdminOptions): KafkaAdmin {
  let admin: Admin | undefined;
  const client = (): Admin => (admin ??= new Admin(options));

  const topic = async (name: string): Promise<ClusterTopicMetadata> => {
    const found = await topicMetadata(client(), name);
    if (found === undefined) throw new UnknownTopicError(name);
    return found;
  };

  /** Per partition the offset ListOffsets answers for `timestamp`. */
  const listOffsets = async (name: string, partitions: readonly number[], timestamp: bigint): Promise<Map<number, bigint>> => {
    const [listed] = await client().listOffsets({
      topics: [{ name, partitions: partitions.map((partitionIndex) => ({ partitionIndex, timestamp })) }],
    });
    return new Map((listed?.partitions ?? []).map(({ partitionIndex, offset }) => [partitionIndex, offset]));
  };

  const waitForLeaders = async (names: readonly string[]): Promise<void> => {
    const deadline = performance.now() + LEADERS_WAIT_MS;
    for (;;) {
      const described = await Promise.all(names.map((name) => topicMetadata(client(), name)));
      if (described.every((one) => one !== undefined && one.partitions.length > 0 && one.partitions.every((p) => p.leader >= 0))) return;
      if (performance.now() > deadline)
        throw new Error(`topics ${names.join(', ')} have no leader for every partition after ${LEADERS_WAIT_MS} ms`);
      await sleep(LEADERS_POLL_MS);
    }
  };

  return {
    async connect() {
      await client().listApis();
    },
    async disconnect() {
      const current = admin;
      admin = undefined;
      await current?.close();
    },
    listTopics: () => client().listTopics(),
    async topicPartitions(topics) {
      const described = await Promise.all([...new Set(topics)].map(async (name) => [name, await topicMetadata(client(), name)] as const));
      return new Map(described.flatMap(([name, found]) => (found === undefined ? [] : [[name, found.partitionsCount] as const])));
    },
    async createTopics(topics) {
      try {
        await client().createTopics({ topics: topics.map(({ topic: name, partitions }) => ({ topic: name, partitions })) });
      } catch (error) {
        const ids = protocolErrorIds(error);
        // As kafkajs: topics that exist already are no error, and nothing is waited for.
        if (ids.size > 0 && [...ids].every((id) => id === 'TOPIC_ALREADY_EXISTS')) return false;
        throw error;
      }
      await waitForLeaders(topics.map(({ topic: name }) => name));
      return true;
    },
    async partitionOffsets(name) {
      const partitions = partitionsOf(await topic(name));
      const [low, high] = await Promise.all([listOffsets(name, partitions, EARLIEST), listOffsets(name, partitions, LATEST)]);
      return partitions.map((partition) => ({
        partition,
        low: String(low.get(partition) ?? 0n),
        high: String(high.get(partition) ?? 0n),
      }));
    },
    async offsetsAtTime(name, timestampMs) {
      const partitions = partitionsOf(await topic(name));
      const [found, high] = await Promise.all([listOffsets(name, partitions, BigInt(timestampMs)), listOffsets(name, partitions, LATEST)]);
      // No record at or after the time: the answer is -1, and the port's answer the end.
      return partitions.map((partition) => {
        const offset = found.get(partition) ?? -1n;
        return { partition, offset: String(offset >= 0n ? offset : (high.get(partition) ?? 0n)) };
      });
    },
    async committedOffsets(group, name) {
      const partitionIndexes = partitionsOf(await topic(name));
      const [listed] = await client().listConsumerGroupOffsets({ groups: [{ groupId: group, topics: [{ name, partitionIndexes }] }] });
      const committed = new Map<number, bigint>();
      for (const { partitions } of (listed?.topics ?? []).filter((one) => one.name === name))
        for (const { partitionIndex, committedOffset } of partitions)
          if (committedOffset >= 0n) committed.set(partitionIndex, committedOffset);
      return committed;
    },
    async describeGroups(groups) {
      const described = await client().describeGroups({ groups: [...groups] });
      return [...described.values()].map((group): DescribedGroup => ({
        groupId: group.id,
        state: group.state,
        protocolType: group.protocolType,
        members: [...group.members.values()].map(({ id, clientId, clientHost, assignments }) => ({
          memberId: id,
          clientId,
          clientHost,
          assignment: Object.fromEntries([...(assignments?.values() ?? [])].map(({ topic: name, partitions }) => [name, [...partitions]])),
        })),
      }));
    },
    async listGroups() {
      const groups = await client().listGroups();
      return [...groups.values()].map(({ id, protocolType }) => ({ groupId: id, protocolType }));
    },
    async setOffsets(group, name, partitions) {
      try {
        await client().alterConsumerGroupOffsets({
          groupId: group,
          topics: [{ name, partitionOffsets: partitions.map(({ partition, offset }) => ({ partition, offset: BigInt(offset) })) }],
        });
      } catch (error) {
        if (MEMBERS_PRESENT.some((id) => protocolErrorIds(error).has(id))) throw new GroupNotEmptyError(group, { cause: error });
        throw error;
      }
    },
    async deleteGroups(groups) {
      if (groups.length > 0) await client().deleteGroups({ groups: [...groups] });
    },
  };
}
