/**
 * The Kafka port's contract (kafka/port.ts), consumer side, on the real broker, for every client
 * kafka/clients.ts can build: what a consumer hands over (null keys, values and header values,
 * duplicate headers in wire order, int64 timestamps past 2^53, every codec from Kafka's own Java
 * producer, transactions' markers and aborted records left out, their offsets skipped), seek, pause
 * and resume, a rebalance whose join waits for the member's writes (no two members write one
 * partition at once), a leave on stop, and a corrupt batch (a crash the consumer does not restart
 * from, naming the batch). The admin side is kafka-port-contract.test.ts.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, describe, expect, it } from 'vitest';
import { createKafkaClient, verifyKafkaClient } from '../../kafka/clients.js';
import { plaintextKafka } from '../../kafka/connection.js';
import type { ConsumerCrash, ConsumerPort, GroupJoin, GroupStep, KafkaClientName, PartitionHandle } from '../../kafka/port.js';
import type { SourceRecord } from '../../shared/kafka-event-builder.js';
import { consoleProduce, killConsoleProducers } from '../helpers/console-producer.js';
import { spoilFirstGzipBatch } from '../helpers/kafka-disk.js';
import { createTestTopic, produce, testBrokers, testKafka } from '../helpers/kafka.js';

const CLIENTS: readonly KafkaClientName[] = ['kafkajs', 'platformatic'];

/** One write of a member: which partition, from when to when (performance.now()). */
interface Write {
  readonly member: string;
  readonly partition: number;
  readonly start: number;
  readonly end: number;
}

/** A consumer of the port under test, with what it saw. */
interface TestMember {
  readonly port: ConsumerPort;
  readonly records: SourceRecord[];
  readonly joins: GroupJoin[];
  /** When each join happened (performance.now()). */
  readonly joinedAt: number[];
  readonly steps: Array<GroupStep['kind']>;
  readonly crashes: ConsumerCrash[];
  readonly writes: Write[];
  /** Batches in the member's hands now. */
  inFlight: number;
}

interface MemberOptions {
  readonly name: string;
  readonly client: KafkaClientName;
  readonly group: string;
  readonly topic: string;
  /** How long each record of a batch takes to "write" before the batch's offsets are committed. */
  readonly writeMs?: number;
  /** Leaves records unresolved and uncommitted (seek and pause tests drive the position). */
  readonly resolve?: boolean;
  readonly sessionTimeoutMs?: number;
}

const members: TestMember[] = [];

afterAll(async () => {
  await killConsoleProducers();
  await Promise.allSettled(members.map((member) => member.port.disconnect()));
});

/** Starts a member: its gate waits for the batches in its hands, its batches are resolved and committed after a write. */
async function startMember(options: MemberOptions): Promise<TestMember> {
  const { name, client, group, topic, writeMs = 0, resolve = true, sessionTimeoutMs = 30_000 } = options;
  const settings = { ...plaintextKafka(testBrokers(), `port-consumer-${name}`), client };
  await verifyKafkaClient(settings);
  const port = createKafkaClient(settings).consumer({
    groupId: group,
    sessionTimeoutMs,
    rebalanceTimeoutMs: 30_000,
    heartbeatIntervalMs: 1_000,
    maxWaitMs: 500,
    maxBytesPerPartition: 1_048_576,
    maxBytes: 4_194_304,
    restartOnFailure: async () => false,
  });
  const member: TestMember = {
    port,
    records: [],
    joins: [],
    joinedAt: [],
    steps: [],
    crashes: [],
    writes: [],
    inFlight: 0,
  };
  members.push(member);
  const drained: Array<() => void> = [];
  port.onGroupJoin((join) => {
    member.joins.push(join);
    member.joinedAt.push(performance.now());
  });
  port.onCrash((crash) => member.crashes.push(crash));
  await port.connect();
  await port.subscribe({ topics: [topic], fromBeginning: true });
  const eachBatch = async (handle: PartitionHandle) => {
    member.inFlight += 1;
    try {
      const start = performance.now();
      // Heartbeats while it writes, as the host does: a client without background heartbeats sends them.
      const heartbeats = setInterval(() => void handle.heartbeat().catch(() => undefined), 1_000);
      try {
        if (writeMs > 0) await sleep(writeMs * handle.batch.records.length);
      } finally {
        clearInterval(heartbeats);
      }
      member.records.push(...handle.batch.records);
      member.writes.push({ member: name, partition: handle.batch.partition, start, end: performance.now() });
      const last = handle.batch.records.at(-1);
      if (!resolve || last === undefined || handle.isStale()) return;
      handle.resolveOffset(String(last.offset));
      const next = (BigInt(last.offset) + 1n).toString();
      await handle.commitOffsetsIfNecessary({ topics: [{ topic, partitions: [{ partition: handle.batch.partition, offset: next }] }] });
    } finally {
      member.inFlight -= 1;
      if (member.inFlight === 0) for (const wake of drained.splice(0)) wake();
    }
  };
  await port.run({
    partitionsConsumedConcurrently: 3,
    eachBatch,
    gate: async (work, step) => {
      member.steps.push(step.kind);
      while (member.inFlight > 0) await new Promise<void>((wake) => drained.push(wake));
      return work();
    },
  });
  return member;
}

/** Waits until `done` holds, checking every 100 ms; fails after `timeoutMs`. */
async function until(done: () => boolean, what: string, timeoutMs = 30_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!done()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

function offsetsOf(records: readonly SourceRecord[], partition?: number): string[] {
  return records.filter((record) => partition === undefined || record.partition === partition).map((record) => String(record.offset));
}

describe.each(CLIENTS)('the Kafka port’s consumer on %s', (client) => {
  const unique = () => `port-consumer-${client}-${randomUUID()}`;

  it('hands over null keys, values and header values, duplicate headers in wire order, and int64 timestamps past 2^53', async () => {
    // Prepare
    const topic = unique();
    await createTestTopic(topic, 1);
    const beyond = '9007199254740993'; // 2^53 + 1: a double would read 9007199254740992
    await produce(topic, [
      { partition: 0, key: null, value: null, headers: { h: ['1', '2'], other: 'x' } },
      { partition: 0, key: 'k', value: 'v', timestamp: beyond },
    ]);
    await consoleProduce({
      topic,
      codec: 'none',
      records: [
        {
          value: 'java',
          headers: [
            ['a', '1'],
            ['b', null],
            ['a', '2'],
          ],
        },
      ],
    });

    // Act
    const member = await startMember({ name: `${client}-records`, client, group: unique(), topic });
    await until(() => member.records.length >= 3, 'three records');
    await member.port.disconnect();

    // Assess
    const [nulls, timed, java] = member.records;
    expect(offsetsOf(member.records)).toEqual(['0', '1', '2']);
    expect([nulls?.key, nulls?.value]).toEqual([null, null]);
    expect(nulls?.headers?.map(({ name, value }) => [name, String(value)])).toEqual([
      ['h', '1'],
      ['h', '2'],
      ['other', 'x'],
    ]);
    expect(String(timed?.timestamp)).toBe(beyond);
    expect(timed?.key?.toString()).toBe('k');
    expect(java?.headers?.map(({ name, value }) => [name, value === null ? null : String(value)])).toEqual([
      ['a', '1'],
      ['b', null],
      ['a', '2'],
    ]);
  });

  it('reads batches of every codec Kafka defines, written by the Java producer', async () => {
    // Prepare
    const topic = unique();
    await createTestTopic(topic, 1);
    const codecs = ['none', 'gzip', 'snappy', 'lz4', 'zstd'];
    for (const codec of codecs) await consoleProduce({ topic, codec, records: [1, 2, 3].map((n) => ({ value: `${codec}-${n}` })) });

    // Act
    const member = await startMember({ name: `${client}-codecs`, client, group: unique(), topic });
    await until(() => member.records.length >= 15, 'fifteen records');
    await member.port.disconnect();

    // Assess
    expect(member.records.map((record) => record.value?.toString())).toEqual(
      codecs.flatMap((codec) => [1, 2, 3].map((n) => `${codec}-${n}`)),
    );
    expect(member.crashes).toEqual([]);
  });

  it('leaves out transaction markers and aborted records; their offsets are skipped', async () => {
    // Prepare: committed (0, 1, marker 2), aborted (3, marker 4), committed (5, marker 6), then a plain record at 7
    const topic = unique();
    await createTestTopic(topic, 1);
    const producer = testKafka(`port-consumer-tx-${client}`).producer({
      transactionalId: unique(),
      idempotent: true,
      maxInFlightRequests: 1,
    });
    await producer.connect();
    try {
      for (const [values, commit] of [
        [['c1', 'c2'], true],
        [['aborted'], false],
        [['c3'], true],
      ] as const) {
        const transaction = await producer.transaction();
        await transaction.send({ topic, messages: values.map((value) => ({ partition: 0, value })) });
        await (commit ? transaction.commit() : transaction.abort());
      }
    } finally {
      await producer.disconnect();
    }
    await produce(topic, [{ partition: 0, value: 'plain' }]);

    // Act
    const member = await startMember({ name: `${client}-tx`, client, group: unique(), topic });
    await until(() => member.records.some((record) => record.value?.toString() === 'plain'), 'the record after the transactions');
    await member.port.disconnect();

    // Assess
    expect(member.records.map((record) => [String(record.offset), record.value?.toString()])).toEqual([
      ['0', 'c1'],
      ['1', 'c2'],
      ['5', 'c3'],
      ['7', 'plain'],
    ]);
  });

  it('fetches from a sought offset, and nothing of a paused topic until it is resumed', async () => {
    // Prepare
    const topic = unique();
    await createTestTopic(topic, 1);
    await produce(
      topic,
      [0, 1, 2, 3, 4].map((n) => ({ partition: 0, value: `r${n}` })),
    );
    const member = await startMember({ name: `${client}-seek`, client, group: unique(), topic });
    await until(() => member.records.length >= 5, 'the first five records');

    // Act: back to 3 (nothing was resolved, so the position was still 0 before), then pause, produce, resume
    member.port.seek({ topic, partition: 0, offset: '3' });
    await until(() => offsetsOf(member.records).slice(5).includes('4'), 'the records from the sought offset');
    member.port.pause([{ topic }]);
    await sleep(1_500);
    const beforePause = member.records.length;
    await produce(topic, [{ partition: 0, value: 'while paused' }]);
    await sleep(2_000);
    const whilePaused = member.records.length;
    member.port.resume([{ topic }]);
    await until(() => member.records.some((record) => record.value?.toString() === 'while paused'), 'the record produced while paused');
    await member.port.disconnect();

    // Assess
    expect(offsetsOf(member.records).slice(0, 5)).toEqual(['0', '1', '2', '3', '4']);
    expect(offsetsOf(member.records).slice(5, 7)).toEqual(['3', '4']);
    expect(whilePaused).toBe(beforePause);
  });

  it('drains a member’s writes before it rejoins: no two members write one partition at once, every record once', async () => {
    // Prepare: four partitions; each batch takes a while to write, so the second member joins while the first one writes
    const topic = unique();
    const group = unique();
    await createTestTopic(topic, 4);
    const half = 200;
    const records = (from: number) => Array.from({ length: half }, (_, n) => ({ partition: n % 4, value: `r${from + n}` }));
    await produce(topic, records(0));
    const first = await startMember({ name: `${client}-a`, client, group, topic, writeMs: 10 });
    await until(() => first.inFlight > 0, 'the first member writing');

    // Act: a second member joins, and more records come
    const second = await startMember({ name: `${client}-b`, client, group, topic, writeMs: 10 });
    await produce(topic, records(half));
    await until(() => first.records.length + second.records.length >= 2 * half, 'every record');
    await Promise.all([first.port.disconnect(), second.port.disconnect()]);

    // Assess
    const overlaps = first.writes.flatMap((a) =>
      second.writes.filter((b) => a.partition === b.partition && a.start < b.end && b.start < a.end).map((b) => [a, b]),
    );
    const writtenByBoth = [0, 1, 2, 3].filter(
      (partition) => first.writes.some((a) => a.partition === partition) && second.writes.some((b) => b.partition === partition),
    );
    expect(overlaps).toEqual([]);
    expect(writtenByBoth.length).toBeGreaterThan(0);
    expect(first.joins.length).toBeGreaterThanOrEqual(2);
    const seen = [...first.records, ...second.records].map((record) => `${record.partition}:${String(record.offset)}`);
    expect(new Set(seen).size).toBe(2 * half);
    expect(seen.length).toBe(2 * half);
  });

  it('keeps its membership while its rejoin waits for a write longer than the session timeout: the partitions move only after it', async () => {
    // Prepare: one record per partition, each written for 9 s by the first member (session timeout 6 s)
    const topic = unique();
    const group = unique();
    await createTestTopic(topic, 2);
    await produce(topic, [
      { partition: 0, value: 'a0' },
      { partition: 1, value: 'a1' },
    ]);
    const first = await startMember({ name: `${client}-slow`, client, group, topic, writeMs: 9_000, sessionTimeoutMs: 6_000 });
    await until(() => first.inFlight > 0, 'the first member writing');

    // Act: a second member joins while the first one writes; then a record per partition more
    const second = await startMember({ name: `${client}-quick`, client, group, topic, sessionTimeoutMs: 6_000 });
    await produce(topic, [
      { partition: 0, value: 'b0' },
      { partition: 1, value: 'b1' },
    ]);
    await until(() => first.records.length + second.records.length >= 4, 'every record', 60_000);
    await Promise.all([first.port.disconnect(), second.port.disconnect()]);

    // Assess: the second member joined only once both writes were done (a timer may fire a hair early); no overlap, every record once
    const [a, b] = first.writes;
    expect([a, b].map((write) => (write?.end ?? 0) - (write?.start ?? 0) >= 8_900)).toEqual([true, true]);
    expect(second.joinedAt[0]).toBeGreaterThanOrEqual(Math.max(a?.end ?? Infinity, b?.end ?? Infinity));
    const overlaps = first.writes.flatMap((a) =>
      second.writes.filter((b) => a.partition === b.partition && a.start < b.end && b.start < a.end).map((b) => [a, b]),
    );
    expect(overlaps).toEqual([]);
    const seen = [...first.records, ...second.records].map((record) => `${record.partition}:${String(record.offset)}`);
    expect(seen.sort()).toEqual(['0:0', '0:1', '1:0', '1:1']);
  });

  it('leaves its group on a stop, through the gate: the group is empty at once', async () => {
    // Prepare
    const topic = unique();
    const group = unique();
    await createTestTopic(topic, 1);
    const member = await startMember({ name: `${client}-leave`, client, group, topic });
    await until(() => member.joins.length > 0, 'the join');
    const admin = testKafka('port-consumer-leave').admin();
    await admin.connect();

    // Act
    const stopped = performance.now();
    await member.port.disconnect();
    const left = performance.now() - stopped;
    const { groups } = await admin.describeGroups([group]);
    await admin.disconnect();

    // Assess: well within the 30 s session timeout that would empty it otherwise
    expect(groups[0]?.state).toBe('Empty');
    expect(left).toBeLessThan(10_000);
    expect(member.steps).toEqual(['join', 'leave']);
  });

  it('crashes without a restart on a corrupt batch, naming its partition, offsets and codec, having committed nothing past it', async () => {
    // Prepare: a plain record (0), three in one gzip batch (1..3) spoilt on the broker's disk, a plain record (4)
    const topic = unique();
    const group = unique();
    await createTestTopic(topic, 1);
    await produce(topic, [{ partition: 0, value: 'before' }]);
    await consoleProduce({ topic, codec: 'gzip', records: [1, 2, 3].map((n) => ({ value: `gzip-${n}` })) });
    await produce(topic, [{ partition: 0, value: 'after' }]);
    const spoilt = await spoilFirstGzipBatch(topic, 0);

    // Act
    const member = await startMember({ name: `${client}-corrupt`, client, group, topic });
    await until(() => member.crashes.length > 0, 'the crash', 90_000);
    await member.port.disconnect();
    const admin = testKafka('port-consumer-corrupt').admin();
    await admin.connect();
    const [committed] = await admin.fetchOffsets({ groupId: group, topics: [topic] });
    await admin.disconnect();

    // Assess
    expect(spoilt).toEqual({ first: '1', last: '3' });
    const [crash] = member.crashes;
    expect(crash?.restart).toBe(false);
    expect(crash?.unreadable?.location).toEqual({ partition: 0, baseOffset: '1', lastOffset: '3' });
    expect(crash?.unreadable?.codec).toBe('gzip');
    expect(offsetsOf(member.records).filter((offset) => BigInt(offset) >= 1n)).toEqual([]);
    expect(BigInt(committed?.partitions[0]?.offset ?? '-1')).toBeLessThanOrEqual(1n);
  });
});
