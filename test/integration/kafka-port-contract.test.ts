/**
 * The Kafka port's contract (kafka/port.ts) on the real broker, for every client kafka/clients.ts
 * can build. So far its admin side: offsets of a topic and of a missing one, a group's committed
 * offsets and decoded assignments, a reset refused for a group with members, topic ids (the same
 * on every client), the partition reader (peek), reconcile's reader of a partition range
 * through committed and aborted transactions and a deleted start, topics created and counted,
 * groups listed and deleted. The consumer side is held by the host's integration tests.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKafkaClient } from '../../kafka/clients.js';
import { plaintextKafka } from '../../kafka/connection.js';
import { PartitionRangeGoneError, kafkaPartitionReader } from '../../kafka/partition-reader.js';
import type { KafkaAdmin, KafkaClient, KafkaClientName } from '../../kafka/port.js';
import { GroupNotEmptyError, UnknownTopicError } from '../../kafka/port.js';
import type { KafkaSettings } from '../../kafka/settings.js';
import { createTestTopic, produce, testBrokers, testKafka } from '../helpers/kafka.js';

const CLIENTS: readonly KafkaClientName[] = ['kafkajs', 'platformatic'];

describe.each(CLIENTS)('the Kafka port on %s', (name) => {
  const topic = `port-contract-${name}-${randomUUID()}`;
  const group = `port-contract-${name}-${randomUUID()}`;
  let settings: KafkaSettings;
  let client: KafkaClient;
  let admin: KafkaAdmin;

  beforeAll(async () => {
    await createTestTopic(topic, 2);
    await produce(topic, [
      { partition: 0, key: 'k0', value: 'a', headers: { h: ['1', '2'] } },
      { partition: 0, key: null, value: null },
      { partition: 1, key: 'k1', value: 'b' },
    ]);
    settings = { ...plaintextKafka(testBrokers(), 'port-contract'), client: name };
    client = createKafkaClient(settings);
    admin = client.admin();
    await admin.connect();
  });

  afterAll(async () => {
    await admin?.disconnect();
  });

  it('reads every partition’s earliest and end offsets; a missing topic is an UnknownTopicError', async () => {
    // Act
    const offsets = await admin.partitionOffsets(topic);
    const missing = await admin.partitionOffsets(`${topic}-missing`).catch((error: unknown) => error);

    // Assess
    expect([...offsets].sort((a, b) => a.partition - b.partition)).toEqual([
      { partition: 0, low: '0', high: '2' },
      { partition: 1, low: '0', high: '1' },
    ]);
    expect(missing).toBeInstanceOf(UnknownTopicError);
  });

  it('sets and reads an empty group’s committed offsets; a partition without one is absent', async () => {
    // Act
    await admin.setOffsets(group, topic, [{ partition: 0, offset: '1' }]);
    const committed = await admin.committedOffsets(group, topic);

    // Assess
    expect([...committed]).toEqual([[0, 1n]]);
  });

  it('describes a group with its members’ assignments decoded, and refuses to reset it while it has members', async () => {
    // Prepare: a kafkajs member of the group, assigned both partitions
    const member = testKafka('port-contract-member').consumer({ groupId: group });
    await member.connect();
    await member.subscribe({ topics: [topic], fromBeginning: true });
    let joined!: () => void;
    const join = new Promise<void>((resolve) => (joined = resolve));
    member.on(member.events.GROUP_JOIN, () => joined());
    await member.run({ autoCommit: false, eachMessage: async () => undefined });
    await join;
    try {
      // Act
      const [described] = await admin.describeGroups([group]);
      const refused = await admin.setOffsets(group, topic, [{ partition: 0, offset: '0' }]).catch((error: unknown) => error);

      // Assess
      expect(described?.state).toBe('Stable');
      expect(described?.members.map((one) => [...(one.assignment[topic] ?? [])].sort())).toEqual([[0, 1]]);
      expect(refused).toBeInstanceOf(GroupNotEmptyError);
    } finally {
      await member.disconnect();
    }
  });

  it('reads a topic’s id, the same as kafkajs reads, and none for a missing topic', async () => {
    // Prepare
    const reference = createKafkaClient({ ...settings, client: 'kafkajs' }).topicIds();
    const [expected] = await reference.read([topic]).finally(() => reference.close());

    // Act
    const ids = client.topicIds();
    const [found, missing] = await ids.read([topic, `${topic}-missing`]).finally(() => ids.close());

    // Assess
    expect(found?.id).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(found?.id).toBe(expected?.id);
    expect(found?.partitions).toEqual([0, 1]);
    expect(missing?.id).toBeUndefined();
  });

  it('reads records of one partition with null keys and values and duplicate headers in wire order', async () => {
    // Act
    const { records, complete } = await client
      .partitionReader()
      .read({ topic, partition: 0, offset: 0n, count: 2, end: 2n, timeoutMs: 30_000 });

    // Assess
    expect(complete).toBe(true);
    expect(records.map((record) => [record.offset, record.key?.toString() ?? null, record.value?.toString() ?? null])).toEqual([
      ['0', 'k0', 'a'],
      ['1', null, null],
    ]);
    expect(records[0]?.headers?.map((header) => [header.name, String(header.value)])).toEqual([
      ['h', '1'],
      ['h', '2'],
    ]);
  });

  it('reads a partition range for reconcile: committed records only, past transaction markers; a deleted start is gone', async () => {
    // Prepare: offset 0 plain, 1-2 a committed transaction and its marker, 3-4 an aborted one and
    // its marker, 5 plain; then a group's commit at 5
    const ranged = `${topic}-range`;
    await createTestTopic(ranged, 1);
    await produce(ranged, [{ partition: 0, key: 'k', value: 'a' }]);
    const producer = testKafka('port-contract-tx').producer({ transactionalId: `${ranged}-tx`, idempotent: true, maxInFlightRequests: 1 });
    await producer.connect();
    try {
      const committed = await producer.transaction();
      await committed.send({ topic: ranged, messages: [{ partition: 0, key: 'k', value: 'b' }] });
      await committed.commit();
      const aborted = await producer.transaction();
      await aborted.send({ topic: ranged, messages: [{ partition: 0, key: 'k', value: 'aborted' }] });
      await aborted.abort();
    } finally {
      await producer.disconnect();
    }
    await produce(ranged, [{ partition: 0, key: 'k', value: 'c' }]);
    await admin.setOffsets(group, ranged, [{ partition: 0, offset: '5' }]);
    const reader = await kafkaPartitionReader(settings, 'contract');
    try {
      // Act
      const bounds = await reader.bounds(ranged, group);
      const fromStart = await reader.offsetsAt(ranged, new Date(0));
      const read: string[] = [];
      for await (const records of reader.read(ranged, 0, 0n, 6n)) read.push(...records.map((record) => `${record.offset}:${record.value}`));
      const tail: string[] = [];
      for await (const records of reader.read(ranged, 0, 2n, 6n)) tail.push(...records.map((record) => String(record.offset)));
      const trimmed = testKafka('port-contract-trim').admin();
      await trimmed.connect();
      await trimmed.fetchTopicMetadata({ topics: [ranged] });
      await trimmed.deleteTopicRecords({ topic: ranged, partitions: [{ partition: 0, offset: '1' }] }).finally(() => trimmed.disconnect());
      const gone = await (async () => {
        for await (const _records of reader.read(ranged, 0, 0n, 6n)) return 'read';
        return 'nothing';
      })().catch((error: unknown) => error);

      // Assess
      expect(bounds.partitions).toEqual([{ partition: 0, start: 0n, end: 6n, committed: 5n }]);
      expect(bounds.id).toMatch(/^[A-Za-z0-9_-]{22}$/);
      expect([...fromStart]).toEqual([[0, 0n]]);
      expect(read).toEqual(['0:a', '1:b', '5:c']);
      expect(tail).toEqual(['5']);
      expect(gone).toBeInstanceOf(PartitionRangeGoneError);
    } finally {
      await reader.close();
    }
  });

  it('creates topics with their leaders (false when they exist), lists them and their partition counts, lists and deletes groups', async () => {
    // Prepare: the group holds committed offsets since the tests above
    const fresh = `${topic}-created`;

    // Act
    const created = await admin.createTopics([{ topic: fresh, partitions: 3 }]);
    const again = await admin.createTopics([{ topic: fresh, partitions: 3 }]);
    const offsets = await admin.partitionOffsets(fresh);
    const listed = await admin.listTopics();
    const counts = await admin.topicPartitions([fresh, topic, `${topic}-missing`]);
    const groupsBefore = (await admin.listGroups()).map(({ groupId }) => groupId);
    await admin.deleteGroups([group]);
    const groupsAfter = (await admin.listGroups()).map(({ groupId }) => groupId);
    const [deleted] = await admin.describeGroups([group]);

    // Assess
    expect([created, again]).toEqual([true, false]);
    expect(offsets.map(({ partition, low, high }) => [partition, low, high]).sort()).toEqual([
      [0, '0', '0'],
      [1, '0', '0'],
      [2, '0', '0'],
    ]);
    expect(listed).toEqual(expect.arrayContaining([topic, fresh]));
    expect([...counts].sort()).toEqual([
      [topic, 2],
      [fresh, 3],
    ]);
    expect(groupsBefore).toContain(group);
    expect(groupsAfter).not.toContain(group);
    expect(deleted?.state).toBe('Dead');
  });
});
