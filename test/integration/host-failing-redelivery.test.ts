/**
 * A batch waiting for its redelivery no longer hides a consumer that cannot fetch (issue 26): a
 * batch fails on the database (its table locked, a 1 s statement timeout), then the broker (one
 * of this file's own; the run's shared broker is never stopped) goes away. The pipeline can
 * neither store nor fetch, so it fails within the fail bound plus one watch tick, and the host
 * exits 1; before, it stayed STALLED, `/healthz` 200, for as long as one cared to wait.
 */
import { randomBytes } from 'node:crypto';
import { Kafka, logLevel } from 'kafkajs';
import type { Admin } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startBroker } from '../../dev/kafka/broker.js';
import type { StartedBroker } from '../../dev/kafka/broker.js';
import { ensureTopics, TOPIC_PARTITIONS } from '../../kafka/topics.js';
import { PIPELINE_NAMES } from '../../shared/pipelines.js';
import type { PipelineName } from '../../shared/pipelines.js';
import { createMigratedSchema } from '../helpers/database.js';
import type { TestSchema } from '../helpers/database.js';
import {
  hostEnvironment,
  jsonMessages,
  killAllHosts,
  spawnHost,
  stateIs,
  temporaryDirectory,
  waitForCommittedToEnd,
  waitUntil,
} from '../helpers/host.js';
import type { HostLogLine, PipelineNames } from '../helpers/host.js';
import { sampleReview } from '../helpers/messages.js';

const FAIL_MS = 10_000;
const TICK_MS = 1_000;

let schema: TestSchema;
let broker: StartedBroker | undefined;
let admin: Admin | undefined;
const cleanups: Array<() => Promise<void>> = [];

beforeAll(async () => {
  schema = await createMigratedSchema([{ id: 1, package_name: 'com.example.weather' }], 'failingredelivery');
  broker = await startBroker({ ephemeral: true, heapMb: 256, log: (text) => console.log(`[failing-redelivery kafka] ${text}`) });
});

afterAll(async () => {
  await killAllHosts();
  for (const cleanup of cleanups.reverse()) await cleanup();
  await admin?.disconnect().catch(() => undefined);
  await broker?.stop();
  await schema?.drop();
});

const reviews = (prefix: string, count: number) =>
  Array.from({ length: count }, (_, index) => ({ ...sampleReview(), review_id: `${prefix}:${index}` }));

describe('a batch waiting for its redelivery, then the broker gone', () => {
  it('fails the pipeline within the fail bound plus a tick, and the host exits 1', async () => {
    // Prepare: a host of reviews on this file's broker, one stored batch
    const brokers = (broker as StartedBroker).brokers;
    const run = `redelivery-${randomBytes(4).toString('hex')}`;
    const topics = Object.fromEntries(PIPELINE_NAMES.map((name) => [name, `${run}-${name}`])) as Record<PipelineName, string>;
    const groups = Object.fromEntries(PIPELINE_NAMES.map((name) => [name, `${run}.${name}`])) as Record<PipelineName, string>;
    await ensureTopics(brokers, [{ topic: topics.reviews, partitions: TOPIC_PARTITIONS }], {
      logger: { info: () => undefined, warn: (text) => console.warn(text) },
    });
    const names: PipelineNames = { topics, groups };
    const kafka = new Kafka({ clientId: 'failing-redelivery-test', brokers, logLevel: logLevel.NOTHING, retry: { retries: 2 } });
    admin = kafka.admin();
    await admin.connect();
    const producer = kafka.producer();
    await producer.connect();
    const heartbeats = await temporaryDirectory('failing-redelivery-');
    cleanups.push(heartbeats.remove);
    const host = spawnHost(
      hostEnvironment({
        databaseUrl: schema.url,
        names,
        heartbeatDir: heartbeats.path,
        extra: {
          KAFKA_BROKERS: brokers.join(','),
          STORAGE_PIPELINES: 'reviews',
          STORAGE_FETCH_UNREADY_AFTER_MS: '3000',
          STORAGE_FETCH_FAIL_AFTER_MS: String(FAIL_MS),
          STORAGE_DB_STATEMENT_TIMEOUT_MS: '1000',
          STORAGE_SHUTDOWN_TIMEOUT_MS: '5000',
        },
      }),
    );
    await host.waitForLog(stateIs('Running'), 90_000);
    await producer.send({ topic: topics.reviews, messages: jsonMessages(reviews('stored', 10)) });
    await waitForCommittedToEnd(admin, groups.reviews, topics.reviews);

    // Act: the database fails the next batch (a lock outlasting the statement timeout) ...
    const locker = await schema.pool.connect();
    cleanups.push(async () => {
      await locker.query('ROLLBACK').catch(() => undefined);
      locker.release();
    });
    await locker.query('BEGIN');
    await locker.query('LOCK TABLE reviews IN ACCESS EXCLUSIVE MODE');
    await producer.send({ topic: topics.reviews, messages: jsonMessages(reviews('failing', 20)) });
    await producer.disconnect();
    await waitUntil(
      'two batches not stored',
      async () => host.lines.filter((line) => line.message === 'batch not stored; redelivering it after a back-off').length >= 2,
      60_000,
      100,
    );
    // ... then the broker goes away
    await admin.disconnect();
    admin = undefined;
    const brokerDownAt = Date.now();
    await (broker as StartedBroker).stop();
    broker = undefined;
    const brokerGoneAt = Date.now();
    const exit = await Promise.race([
      host.exited,
      new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), FAIL_MS + 60_000)),
    ]);
    const exitedAt = Date.now();

    // Assess: the failure came within the bound plus a tick of the last moment the pipeline could
    // still have made progress: the broker gone, and the last failed attempt's back-off over
    const notStored = host.lines.filter((line) => line.message === 'batch not stored; redelivering it after a back-off');
    const last = notStored.at(-1) as HostLogLine;
    const lastChance = Math.max(brokerGoneAt, Date.parse(String(last.timestamp)) + Number(last.delayMs));
    const failed = host.lines.find((line) => line.message === 'pipeline failed');
    const failedAt = Date.parse(String(failed?.timestamp));
    console.log(
      `[failing-redelivery] ${notStored.length} attempts not stored (last: ${String(last.error)}, delayMs ${String(last.delayMs)}); ` +
        `broker stopped in ${brokerGoneAt - brokerDownAt} ms; pipeline failed ${failedAt - lastChance} ms after the last chance ` +
        `(STORAGE_FETCH_FAIL_AFTER_MS=${FAIL_MS}): ${JSON.stringify({ level: failed?.level, message: failed?.message, error: failed?.error })}; ` +
        `exit ${String(exit?.code)} ${exitedAt - brokerGoneAt} ms after the broker was gone, ${exitedAt - failedAt} ms after the failure; ` +
        `${JSON.stringify(host.lines.find(stateIs('Stopped')))}`,
    );
    const fromFailure = host.lines.slice(host.lines.indexOf(failed as HostLogLine));
    console.log(
      `[failing-redelivery] from the failure to the exit:\n${fromFailure
        .map((entry) => `${String(entry.timestamp)} ${String(entry.level)} ${String(entry.message)}`)
        .join('\n')}`,
    );
    expect(exit?.code).toBe(1);
    // Either the fail bound ends it, naming the waiting batch, or, first, kafkajs itself gives up on
    // the gone broker (`kafka consumer crashed: Failed to find group coordinator`, seen in CI): both
    // are the failure guarantee 4 asks for, within the bound below.
    expect(String(failed?.error)).toMatch(
      /^pipeline reviews failed: (no fetch completed for \d+ s.*, a batch waits for its redelivery \(partition \d+ offsets \d+\.\.\d+\) \(STORAGE_FETCH_FAIL_AFTER_MS=10000\)|kafka consumer crashed: .+)$/,
    );
    expect(failedAt - lastChance).toBeLessThanOrEqual(FAIL_MS + TICK_MS + 500);
    // The process goes down right after: nothing is left to finish (the stop does not wait for the broker).
    expect(exitedAt - failedAt).toBeLessThan(5_000);
    // A leave kafkajs still retries against the gone broker is let go after a poll and 2 s, not
    // waited for until the shutdown timeout (seen in CI: 5,014 ms, 'shutdown timed out').
    expect(host.lines.filter((line) => String(line.message).startsWith('shutdown timed out'))).toEqual([]);
    expect(host.lines.find(stateIs('Stopped'))).toMatchObject({ exitCode: 1 });
  });
});

describe('a stop with the broker gone', () => {
  it("says the writes finished and only the group's leave is left, and exits 1 at the shutdown timeout", async () => {
    // Prepare: a host of reviews on a broker of this test's own, its batches stored and committed
    const ownSchema = await createMigratedSchema([{ id: 1, package_name: 'com.example.weather' }], 'stopbrokergone');
    cleanups.push(() => ownSchema.drop());
    const own = await startBroker({ ephemeral: true, heapMb: 256, log: (text) => console.log(`[stop-broker-gone kafka] ${text}`) });
    let stopOwn: (() => Promise<void>) | undefined = () => own.stop();
    cleanups.push(async () => stopOwn?.());
    const run = `stopgone-${randomBytes(4).toString('hex')}`;
    const topics = Object.fromEntries(PIPELINE_NAMES.map((name) => [name, `${run}-${name}`])) as Record<PipelineName, string>;
    const groups = Object.fromEntries(PIPELINE_NAMES.map((name) => [name, `${run}.${name}`])) as Record<PipelineName, string>;
    await ensureTopics(own.brokers, [{ topic: topics.reviews, partitions: TOPIC_PARTITIONS }], {
      logger: { info: () => undefined, warn: (text) => console.warn(text) },
    });
    const kafka = new Kafka({ clientId: 'stop-broker-gone-test', brokers: own.brokers, logLevel: logLevel.NOTHING, retry: { retries: 2 } });
    const ownAdmin = kafka.admin();
    await ownAdmin.connect();
    const producer = kafka.producer();
    await producer.connect();
    const heartbeats = await temporaryDirectory('stop-broker-gone-');
    cleanups.push(heartbeats.remove);
    const shutdownTimeoutMs = 4_000;
    const host = spawnHost(
      hostEnvironment({
        databaseUrl: ownSchema.url,
        names: { topics, groups },
        heartbeatDir: heartbeats.path,
        extra: {
          KAFKA_BROKERS: own.brokers.join(','),
          STORAGE_PIPELINES: 'reviews',
          STORAGE_SHUTDOWN_TIMEOUT_MS: String(shutdownTimeoutMs),
        },
      }),
    );
    await host.waitForLog(stateIs('Running'), 90_000);
    await producer.send({ topic: topics.reviews, messages: jsonMessages(reviews('gone', 10)) });
    await producer.disconnect();
    await waitForCommittedToEnd(ownAdmin, groups.reviews, topics.reviews);
    await ownAdmin.disconnect();

    // Act: the broker goes, then the operator stops the host
    await own.stop();
    stopOwn = undefined;
    const stoppedAt = performance.now();
    host.child.kill('SIGTERM');
    const exit = await Promise.race([host.exited, new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), 60_000))]);
    const tookMs = performance.now() - stoppedAt;

    // Assess: nothing was being written, so the timeout says the leave is what did not finish
    const timedOut = host.lines.find((line) => String(line.message).startsWith('shutdown timed out'));
    console.log(
      `[stop-broker-gone] exit ${String(exit?.code)} ${Math.round(tookMs)} ms after SIGTERM (STORAGE_SHUTDOWN_TIMEOUT_MS=${shutdownTimeoutMs}): ` +
        JSON.stringify(timedOut ?? null),
    );
    expect(exit?.code).toBe(1);
    expect(tookMs).toBeGreaterThanOrEqual(shutdownTimeoutMs);
    expect(tookMs).toBeLessThan(shutdownTimeoutMs + 5_000);
    expect(timedOut).toMatchObject({
      level: 'ERROR',
      message:
        "shutdown timed out leaving the consumer group: the writes in flight finished; the group's coordinator drops this member after its session timeout",
      writing: [],
      leaving: ['reviews'],
    });
    expect(host.lines.find(stateIs('Stopped'))).toMatchObject({ exitCode: 1 });
    const rows = await ownSchema.pool.query<{ count: number }>(`SELECT count(*)::int AS count FROM reviews WHERE review_id LIKE 'gone:%'`);
    expect(rows.rows[0]?.count).toBe(10);
  });
});
