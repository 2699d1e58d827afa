import { Kafka, logLevel } from 'kafkajs';
import type { Admin, Consumer } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startBroker } from '../../dev/kafka/broker.js';
import type { StartedBroker } from '../../dev/kafka/broker.js';
import { runCli } from '../helpers/cli.js';
import { createMigratedSchema } from '../helpers/database.js';
import type { TestSchema } from '../helpers/database.js';
import { committedOffsets, endOffsets } from '../helpers/host.js';
import { createTestTopic } from '../helpers/kafka.js';

/**
 * `replay` racing a host that joins the group (issue 26, suspected). kafkajs resets a group's
 * offsets through a consumer of that group: it checks that the group is empty, joins, and
 * commits the offset of each partition it is assigned; a partition it is not assigned is
 * silently left alone. A production broker waits `group.initial.rebalance.delay.ms` (3 s by
 * default) for more members when a member joins an empty group, so a host started during a
 * replay lands in the same generation, takes some partitions, and the reset moves only the
 * others. This file runs its own broker with that default (the shared test broker sets 0).
 */

const TOPIC = 'race-reviews';
const GROUP = 'race.storage-consumer.reviews';

let broker: StartedBroker;
let kafka: Kafka;
let admin: Admin;
let schema: TestSchema;

beforeAll(async () => {
  broker = await startBroker({
    ephemeral: true,
    heapMb: 256,
    properties: { 'group.initial.rebalance.delay.ms': '3000' },
    log: (text) => console.log(`[replay-race kafka] ${text}`),
  });
  kafka = new Kafka({ clientId: 'replay-race-test', brokers: broker.brokers, logLevel: logLevel.NOTHING });
  admin = kafka.admin();
  await admin.connect();
  await createTestTopic(TOPIC, 3, broker.brokers);
  const producer = kafka.producer();
  await producer.connect();
  await producer.send({
    topic: TOPIC,
    messages: Array.from({ length: 30 }, (_, index) => ({ key: `k${index}`, value: `{"n": ${index}}` })),
  });
  await producer.disconnect();
  schema = await createMigratedSchema([], 'clireplayrace');
}, 180_000);

afterAll(async () => {
  await admin?.disconnect();
  await schema?.drop();
  await broker?.stop();
});

/** The group consumed everything: committed at the end of each partition, no member. */
async function commitAtEnd(): Promise<Map<number, bigint>> {
  const ends = await endOffsets(admin, TOPIC);
  await admin.setOffsets({
    groupId: GROUP,
    topic: TOPIC,
    partitions: [...ends].map(([partition, offset]) => ({ partition, offset: `${offset}` })),
  });
  return ends;
}

/** A host's consumer, connected and subscribed, that joins when `run` is called; it commits nothing. */
async function joiningMember(): Promise<Consumer> {
  const consumer = kafka.consumer({ groupId: GROUP, sessionTimeout: 10_000 });
  await consumer.connect();
  await consumer.subscribe({ topic: TOPIC, fromBeginning: true });
  return consumer;
}

describe('replay while a host joins the group', () => {
  it('names the partitions the reset did not move, exits 1, and the audit entry records what each partition holds ("failed")', async () => {
    // Prepare
    const ends = await commitAtEnd();
    const host = await joiningMember();
    const env = {
      KAFKA_BROKERS: broker.brokers.join(','),
      DATABASE_URL: schema.url,
      STORAGE_TOPIC_REVIEWS: TOPIC,
      STORAGE_GROUP_REVIEWS: GROUP,
    };

    // Act: the host starts as soon as the replay's own consumer has joined the empty group
    let hostStarted = false;
    const watch = (async () => {
      for (let polls = 0; polls < 20_000 && !hostStarted; polls += 1) {
        const { groups } = await admin.describeGroups([GROUP]);
        if ((groups[0]?.members.length ?? 0) > 0) {
          hostStarted = true;
          await host.run({ autoCommit: false, eachBatch: async () => undefined });
          return;
        }
      }
    })();
    const replayed = await runCli(['replay', 'reviews', '--to', 'earliest', '--json'], env);
    await watch;
    const committed = await committedOffsets(admin, GROUP, TOPIC);
    await host.disconnect();
    const report = JSON.parse(replayed.stdout) as { auditId: string; replayed: boolean; unconfirmed: number[] };
    const { rows } = await schema.pool.query<{
      state: string;
      outcome: { partitions: Array<{ partition: number; before: string; after: string | null; planned: string; applied: boolean }> };
    }>('SELECT state, outcome FROM operator_actions WHERE id = $1', [report.auditId]);
    console.log(
      `replay during a join: exit ${replayed.code}; committed now ${JSON.stringify(Object.fromEntries([...committed].map(([p, o]) => [p, `${o}`])))}`,
    );
    console.log(replayed.stderr.trim());
    console.log(`audit entry ${report.auditId}: ${JSON.stringify(rows[0])}`);

    // Assess: the race happened (only some partitions moved), and every signal says so
    expect(hostStarted).toBe(true);
    const moved = [...committed].filter(([, offset]) => offset === 0n).map(([partition]) => partition);
    const notMoved = [...committed].filter(([partition, offset]) => offset === ends.get(partition)).map(([partition]) => partition);
    expect(moved.length).toBeGreaterThan(0);
    expect(notMoved.length).toBeGreaterThan(0);
    expect(report.replayed).toBe(true);
    expect(report.unconfirmed).toEqual(notMoved);
    expect(replayed.code).toBe(1);
    expect(replayed.stderr).toContain(`the reset is not confirmed on partition(s) ${notMoved.join(', ')} of 3`);
    expect(replayed.stderr).toContain(`audit entry ${report.auditId} records what each partition holds`);
    expect(rows[0]?.state).toBe('failed');
    expect(rows[0]?.outcome.partitions).toEqual(
      [0, 1, 2].map((partition) => ({
        topic: TOPIC,
        partition,
        before: `${ends.get(partition)}`,
        after: `${committed.get(partition)}`,
        planned: '0',
        applied: committed.get(partition) === 0n,
      })),
    );
  });
});
