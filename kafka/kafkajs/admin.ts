/**
 * The admin port (kafka/port.ts) on kafkajs' admin client: member assignments decoded with
 * kafkajs' own consumer protocol, a missing topic an `UnknownTopicError`, a reset of a group with
 * members a `GroupNotEmptyError`.
 */
import { AssignerProtocol } from 'kafkajs';
import type { Admin } from 'kafkajs';
import type { DescribedGroup, KafkaAdmin } from '../port.js';
import { GroupNotEmptyError, UnknownTopicError, isUnknownTopic } from '../port.js';

/** The partitions per topic of a member's assignment; none when it cannot be decoded (a rebalance, another protocol). */
function decodedAssignment(assignment: Buffer | undefined): Record<string, number[]> {
  if (assignment === undefined || assignment.length === 0) return {};
  try {
    return { ...(AssignerProtocol.MemberAssignment.decode(assignment)?.assignment ?? {}) };
  } catch {
    return {};
  }
}

/** A missing topic named as such, whatever kafkajs wrapped its answer in. */
function namingTopic(topic: string) {
  return (error: unknown): never => {
    if (isUnknownTopic(error)) throw new UnknownTopicError(topic, { cause: error });
    throw error;
  };
}

/** The port over one kafkajs admin client (not connected yet). */
export function kafkajsAdmin(admin: Admin): KafkaAdmin {
  return {
    connect: () => admin.connect(),
    disconnect: () => admin.disconnect(),
    listTopics: () => admin.listTopics(),
    async topicPartitions(topics) {
      // kafkajs fails the whole metadata request for one missing topic; the port leaves it out.
      const existing = new Set(topics.length === 0 ? [] : await admin.listTopics());
      const present = [...new Set(topics)].filter((topic) => existing.has(topic));
      if (present.length === 0) return new Map();
      const { topics: metadata } = await admin.fetchTopicMetadata({ topics: present });
      return new Map(metadata.map(({ name, partitions }) => [name, partitions.length]));
    },
    createTopics: (topics) =>
      admin.createTopics({ topics: topics.map(({ topic, partitions }) => ({ topic, numPartitions: partitions })), waitForLeaders: true }),
    async partitionOffsets(topic) {
      const offsets = await admin.fetchTopicOffsets(topic).catch(namingTopic(topic));
      return offsets.map(({ partition, low, high }) => ({ partition, low, high }));
    },
    async offsetsAtTime(topic, timestampMs) {
      const found = await admin.fetchTopicOffsetsByTimestamp(topic, timestampMs).catch(namingTopic(topic));
      return found.map(({ partition, offset }) => ({ partition, offset }));
    },
    async committedOffsets(group, topic) {
      const [result] = await admin.fetchOffsets({ groupId: group, topics: [topic] }).catch(namingTopic(topic));
      const committed = new Map<number, bigint>();
      for (const { partition, offset } of result?.partitions ?? []) {
        const value = BigInt(offset);
        if (value >= 0n) committed.set(partition, value);
      }
      return committed;
    },
    async describeGroups(groups) {
      const { groups: described } = await admin.describeGroups([...groups]);
      return described.map((group): DescribedGroup => ({
        groupId: group.groupId,
        state: group.state,
        protocolType: group.protocolType,
        members: group.members.map(({ memberId, clientId, clientHost, memberAssignment }) => ({
          memberId,
          clientId,
          clientHost,
          assignment: decodedAssignment(memberAssignment),
        })),
      }));
    },
    async listGroups() {
      const { groups } = await admin.listGroups();
      return groups.map(({ groupId, protocolType }) => ({ groupId, protocolType }));
    },
    async setOffsets(group, topic, partitions) {
      try {
        await admin.setOffsets({ groupId: group, topic, partitions: partitions.map(({ partition, offset }) => ({ partition, offset })) });
      } catch (error) {
        // kafkajs refuses a group that is not empty before it asks the coordinator.
        if (error instanceof Error && /no running instances/.test(error.message)) throw new GroupNotEmptyError(group, { cause: error });
        throw error;
      }
    },
    deleteGroups: async (groups) => {
      await admin.deleteGroups([...groups]);
    },
  };
}
