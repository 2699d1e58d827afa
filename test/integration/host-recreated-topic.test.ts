/**
 * A position belongs to one topic incarnation, on the real broker and PostgreSQL with the host as
 * operators run it (a child process, reviews only): 300 reviews stored and committed (about 100
 * per partition), then the topic is deleted and re-created with its partitions, and 750 reviews
 * are produced to the new one (about 250 per partition, past the old positions). Under a
 * running host, and under a paused one resumed through the CLI (seconds later, or at once): every review of the
 * new topic is stored, the committed offsets are the new topic's end offsets, the host still
 * runs, and its log says once that the topic was re-created, with both ids. Kafka's own answer is
 * checked too: the re-created topic has a new id, and the group's offsets went with the old one.
 */
import type { Admin } from 'kafkajs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createKafkaClient } from '../../kafka/clients.js';
import { plaintextKafka } from '../../kafka/connection.js';
import type { TopicIdReader } from '../../kafka/port.js';
import { runCli } from '../helpers/cli.js';
import {
  closeHostTestStack,
  committedOffsets,
  createTestPipelines,
  endOffsets,
  hostEnvironment,
  jsonMessages,
  killAllHosts,
  openHostTestStack,
  spawnHost,
  stateIs,
  waitForCommittedToEnd,
  waitUntil,
} from '../helpers/host.js';
import type { HostLogLine, HostProcess, HostTestStack } from '../helpers/host.js';
import { createTestTopic, produce, testBrokers } from '../helpers/kafka.js';
import { sampleReview } from '../helpers/messages.js';

const BEFORE = 300;
const AFTER = 750;

let stack: HostTestStack;
let admin: Admin;
let ids: TopicIdReader;

beforeAll(async () => {
  stack = await openHostTestStack('host-recreated-topic');
  admin = stack.admin;
  ids = createKafkaClient(plaintextKafka(testBrokers(), 'host-recreated-topic-ids')).topicIds();
});

afterAll(async () => {
  await killAllHosts();
  await ids.close();
  await closeHostTestStack(stack, []);
});

const reviews = (prefix: string, count: number) =>
  jsonMessages(
    Array.from({ length: count }, (_, index) => ({ ...sampleReview(), review_id: `${prefix}:${index}` })),
    { key: (index) => `${prefix}:${index}` },
  );

const stored = async (prefix: string) =>
  Number(
    (await stack.schema.pool.query<{ n: string }>('SELECT count(*) AS n FROM reviews WHERE review_id LIKE $1', [`${prefix}:%`])).rows[0]?.n,
  );

const idOf = async (topic: string) => (await ids.read([topic]))[0]?.id;

/** The host's line for a re-created topic (matched on its start; the ids follow). */
const recreatedLine = (topic: string) => (line: HostLogLine) =>
  typeof line.message === 'string' && line.message.startsWith(`topic ${topic} was deleted and re-created (id `);

/** Deletes `topic`, waits until the cluster no longer has it, and creates it again with 3 partitions. */
async function recreate(topic: string): Promise<void> {
  await admin.deleteTopics({ topics: [topic], timeout: 30_000 });
  await waitUntil(`${topic} deleted`, async () => (await idOf(topic)) === undefined, 30_000);
  await createTestTopic(topic, 3);
}

describe('a topic deleted and re-created under a host', () => {
  afterEach(async () => {
    await stack.schema.pool.query('DELETE FROM pipeline_pauses');
    await killAllHosts();
  });

  /** A host for the reviews pipeline alone, running, with {@link BEFORE} reviews stored and committed. */
  async function hostWithStoredReviews(prefix: string) {
    await stack.schema.pool.query('DELETE FROM pipeline_pauses');
    const names = await createTestPipelines(prefix);
    const topic = names.topics.reviews;
    const group = names.groups.reviews;
    const env = hostEnvironment({
      databaseUrl: stack.schema.url,
      names,
      heartbeatDir: stack.heartbeats.path,
      extra: { STORAGE_PIPELINES: 'reviews', STORAGE_PAUSE_POLL_INTERVAL_MS: '500' },
    });
    const host: HostProcess = spawnHost(env);
    await host.waitForLog(stateIs('Running'), 90_000);
    await produce(topic, reviews(`${prefix}-old`, BEFORE));
    const oldPositions = await waitForCommittedToEnd(admin, group, topic);
    expect(await stored(`${prefix}-old`)).toBe(BEFORE);
    return { env, host, topic, group, oldPositions };
  }

  /** What every case ends with: the new topic stored whole, committed to its end, the host up, one change line. */
  async function expectNewTopicStored(
    prefix: string,
    setup: Awaited<ReturnType<typeof hostWithStoredReviews>>,
    topicIds: [string, string],
  ) {
    const { host, topic, group, oldPositions } = setup;
    const committed = await waitForCommittedToEnd(admin, group, topic);
    await waitUntil(`${AFTER} new reviews stored`, async () => (await stored(`${prefix}-new`)) === AFTER, 30_000).catch(() => undefined);
    const ends = await endOffsets(admin, topic);
    console.log(
      `re-created topic ${topic}: old positions ${JSON.stringify([...oldPositions].map(([p, o]) => [p, String(o)]))}, ` +
        `new end offsets ${JSON.stringify([...ends].map(([p, o]) => [p, String(o)]))}, stored ${await stored(`${prefix}-new`)} of ${AFTER}`,
    );
    // The new topic holds more records than the old positions on some partition: the case that skipped records.
    expect([...ends].some(([partition, end]) => end > (oldPositions.get(partition) ?? 0n))).toBe(true);
    expect(await stored(`${prefix}-new`)).toBe(AFTER);
    expect(committed).toEqual(ends);
    expect(host.child.exitCode).toBeNull();
    const line = await host.waitForLog(recreatedLine(topic), 1_000);
    console.log(`host log: ${JSON.stringify(line)}`);
    expect(line.level).toBe('WARN');
    expect(line.message).toBe(
      `topic ${topic} was deleted and re-created (id ${topicIds[0]} -> ${topicIds[1]}): positions of the old incarnation forgotten; ` +
        'reading the new one from its committed offsets or its start',
    );
    expect(host.lines.filter(recreatedLine(topic))).toHaveLength(1);
    const told = host.lines.filter(
      ({ level, message }) => level === 'WARN' || level === 'ERROR' || /^pipeline (paused|resumed)/.test(String(message)),
    );
    console.log(
      `host lines:\n${told.map(({ timestamp, level, message }) => `${String(timestamp)} ${String(level)} ${String(message)}`).join('\n')}`,
    );
  }

  it('under a running host: every record of the new topic is stored, committed to its end', async () => {
    // Prepare
    const prefix = `running-${Date.now()}`;
    const setup = await hostWithStoredReviews(prefix);
    const oldId = await idOf(setup.topic);

    // Act
    await recreate(setup.topic);
    const newId = await idOf(setup.topic);
    // Kafka dropped the group's offsets with the old topic.
    expect([...(await committedOffsets(admin, setup.group, setup.topic)).values()]).toEqual([-1n, -1n, -1n]);
    await produce(setup.topic, reviews(`${prefix}-new`, AFTER));

    // Assess
    expect(oldId).toMatch(/^[\w-]{22}$/);
    expect(newId).toMatch(/^[\w-]{22}$/);
    expect(newId).not.toBe(oldId);
    await expectNewTopicStored(prefix, setup, [oldId as string, newId as string]);
  }, 240_000);

  it('under a paused host, resumed afterwards: every record of the new topic is stored, committed to its end', async () => {
    // Prepare
    const prefix = `paused-${Date.now()}`;
    const setup = await hostWithStoredReviews(prefix);
    const oldId = await idOf(setup.topic);
    const paused = await runCli(['pause', 'reviews', '--reason', 'topic re-created under a paused host'], setup.env);
    expect(paused.code).toBe(0);
    await setup.host.waitForLog((line) => typeof line.message === 'string' && line.message.startsWith('pipeline paused'), 10_000);

    // Act: re-created and filled while paused; the paused host has time to notice (its reads are 5 s apart)
    await recreate(setup.topic);
    const newId = await idOf(setup.topic);
    await produce(setup.topic, reviews(`${prefix}-new`, AFTER));
    await new Promise((resolve) => setTimeout(resolve, 7_000));
    expect(await stored(`${prefix}-new`)).toBe(0);
    const resumed = await runCli(['resume', 'reviews'], setup.env);
    expect(resumed.code).toBe(0);

    // Assess
    expect(newId).not.toBe(oldId);
    await expectNewTopicStored(prefix, setup, [oldId as string, newId as string]);
  }, 240_000);

  it('under a paused host resumed as soon as the new topic is filled: the first fetch after the resume waits for the check', async () => {
    // Prepare
    const prefix = `resumed-${Date.now()}`;
    const setup = await hostWithStoredReviews(prefix);
    const oldId = await idOf(setup.topic);
    expect((await runCli(['pause', 'reviews'], setup.env)).code).toBe(0);
    await setup.host.waitForLog((line) => typeof line.message === 'string' && line.message.startsWith('pipeline paused'), 10_000);

    // Act
    await recreate(setup.topic);
    const newId = await idOf(setup.topic);
    await produce(setup.topic, reviews(`${prefix}-new`, AFTER));
    expect((await runCli(['resume', 'reviews'], setup.env)).code).toBe(0);

    // Assess
    await expectNewTopicStored(prefix, setup, [oldId as string, newId as string]);
  }, 240_000);
});
