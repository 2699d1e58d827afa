import type { Admin } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAppsStandIn, createMigratedSchema, createTestSchema } from '../helpers/database.js';
import type { TestSchema } from '../helpers/database.js';
import {
  committedOffsets,
  createTestPipelines,
  endOffsets,
  hostEnvironment,
  jsonMessages,
  killAllHosts,
  spawnHost,
  stateIs,
  temporaryDirectory,
  waitForCommittedToEnd,
  waitUntil,
} from '../helpers/host.js';
import type { PipelineNames } from '../helpers/host.js';
import { runBin } from '../helpers/cli.js';
import { produce, testKafka } from '../helpers/kafka.js';
import { sampleNetworkMetrics, sampleReview } from '../helpers/messages.js';
import { PIPELINE_NAMES } from '../../shared/pipelines.js';

// The host as operators run it: a child process (`node --import tsx host/main.ts`), signals,
// exit codes. Each test has its own topics and groups.
const FLOOD = 30_000;

let schema: TestSchema;
let admin: Admin;
const cleanups: Array<() => Promise<void>> = [];

beforeAll(async () => {
  schema = await createMigratedSchema([{ id: 1, package_name: 'com.example.weather' }], 'hostlife');
  admin = testKafka('host-lifecycle-test').admin();
  await admin.connect();
});

afterAll(async () => {
  await killAllHosts();
  for (const cleanup of cleanups) await cleanup();
  await admin?.disconnect();
  await schema?.drop();
});

async function environment(names: PipelineNames, databaseUrl = schema.url, extra: Record<string, string> = {}) {
  const heartbeats = await temporaryDirectory('host-life-');
  cleanups.push(heartbeats.remove);
  return hostEnvironment({ databaseUrl, names, heartbeatDir: heartbeats.path, extra });
}

/** A reviews flood already on the topic before the host starts, so the host is the bottleneck. */
async function produceFlood(names: PipelineNames): Promise<void> {
  const topic = names.topics.reviews;
  await produce(
    topic,
    jsonMessages(
      Array.from({ length: FLOOD }, (_, index) => ({ ...sampleReview(), review_id: `${topic}:${index}` })),
      { key: (index) => `k${index}` },
    ),
  );
}

/** Stored reviews of this test per partition: count, and count below each committed offset. */
async function storedPerPartition(topic: string): Promise<Map<number, bigint>> {
  const { rows } = await schema.pool.query<{ partition: number; n: string }>(
    "SELECT source_partition AS partition, count(*) AS n FROM reviews WHERE review_id LIKE $1 || ':%' GROUP BY 1",
    [topic],
  );
  return new Map(rows.map((row) => [row.partition, BigInt(row.n)]));
}

async function storedBelow(topic: string, partition: number, offset: bigint): Promise<bigint> {
  const { rows } = await schema.pool.query<{ n: string }>(
    "SELECT count(*) AS n FROM reviews WHERE review_id LIKE $1 || ':%' AND source_partition = $2 AND source_offset < $3",
    [topic, partition, offset.toString()],
  );
  return BigInt(rows[0]?.n ?? '0');
}

const total = (offsets: Map<number, bigint>) => [...offsets.values()].reduce((sum, offset) => sum + (offset > 0n ? offset : 0n), 0n);

/** The container health check as a HEALTHCHECK runs it: the `healthcheck` command through the bin. */
async function runHealthcheck(env: Record<string, string>, args: string[] = []): Promise<{ code: number | null; output: string }> {
  const { code, stdout, stderr } = await runBin(['healthcheck', ...args], env);
  return { code, output: stdout + stderr };
}

describe('host life cycle', () => {
  it('SIGTERM mid-flood: finishes and commits the in-flight batch, leaves the group, exits 0', async () => {
    // Prepare
    const names = await createTestPipelines('host-life-term');
    await produceFlood(names);
    const host = spawnHost(await environment(names));
    await host.waitForLog(stateIs('Running'));
    await waitUntil('the flood to be under way', async () => total(await storedPerPartition(names.topics.reviews)) >= 1_000n, 60_000, 50);

    // Act
    const signalled = Date.now();
    host.child.kill('SIGTERM');
    const exit = await host.exited;
    const stopMs = Date.now() - signalled;

    // Assess
    expect(exit).toEqual({ code: 0, signal: null });
    expect(host.lines.filter((line) => typeof line.state === 'string').map((line) => line.state)).toEqual([
      'Running',
      'Stopping',
      'Stopped',
    ]);
    expect(host.lines.find(stateIs('Stopped'))).toMatchObject({ exitCode: 0 });
    const committed = await committedOffsets(admin, names.groups.reviews, names.topics.reviews);
    const stored = await storedPerPartition(names.topics.reviews);
    for (const [partition, offset] of committed)
      expect(stored.get(partition) ?? 0n, `partition ${partition}`).toBe(offset < 0n ? 0n : offset);
    expect(total(committed)).toBeLessThan(BigInt(FLOOD));
    const [group] = (await admin.describeGroups([names.groups.reviews])).groups;
    expect(group?.state).toBe('Empty');
    console.info(`SIGTERM: stopped in ${stopMs} ms with ${total(committed)} of ${FLOOD} reviews committed`);
  });

  it('SIGKILL mid-batch, then a restart: nothing lost, nothing duplicated', async () => {
    // Prepare
    const names = await createTestPipelines('host-life-kill');
    const env = await environment(names);
    await produceFlood(names);
    const first = spawnHost(env);
    await first.waitForLog(stateIs('Running'));
    await waitUntil('the flood to be under way', async () => total(await storedPerPartition(names.topics.reviews)) >= 1_000n, 60_000, 50);

    // Act
    first.child.kill('SIGKILL');
    expect(await first.exited).toEqual({ code: null, signal: 'SIGKILL' });
    const atKill = await committedOffsets(admin, names.groups.reviews, names.topics.reviews);
    for (const [partition, offset] of atKill) {
      if (offset > 0n) expect(await storedBelow(names.topics.reviews, partition, offset), `partition ${partition}`).toBe(offset);
    }
    const second = spawnHost(env);
    await second.waitForLog(stateIs('Running'));
    const committed = await waitForCommittedToEnd(admin, names.groups.reviews, names.topics.reviews, 120_000);
    second.child.kill('SIGTERM');

    // Assess
    expect((await second.exited).code).toBe(0);
    expect(total(atKill)).toBeLessThan(BigInt(FLOOD));
    expect(committed).toEqual(await endOffsets(admin, names.topics.reviews));
    expect(await storedPerPartition(names.topics.reviews)).toEqual(committed);
    const { rows } = await schema.pool.query('SELECT count(*)::int AS n FROM dead_letter_events WHERE topic = $1', [names.topics.reviews]);
    expect(rows).toEqual([{ n: 0 }]);
  });

  it('a pipeline failing fatally (its table dropped) stops the others and exits 1', async () => {
    // Prepare: a schema of its own, whose network_metrics table goes away while the host runs
    const broken = await createMigratedSchema([{ id: 1, package_name: 'com.example.weather' }], 'hostfatal');
    cleanups.push(() => broken.drop());
    const names = await createTestPipelines('host-life-fatal');
    const host = spawnHost(await environment(names, broken.url));
    await host.waitForLog(stateIs('Running'));
    await broken.pool.query('DROP TABLE network_metrics');

    // Act
    await produce(names.topics['network-metrics'], jsonMessages([sampleNetworkMetrics()]));
    const exit = await host.exited;

    // Assess
    expect(exit).toEqual({ code: 1, signal: null });
    expect(host.lines.find((line) => line.message === 'pipeline failed')).toMatchObject({
      pipeline: 'network-metrics',
      error: expect.stringMatching(/fatal handler error.*network_metrics/),
    });
    expect(host.lines.filter((line) => typeof line.state === 'string').map((line) => line.state)).toEqual([
      'Running',
      'Failing',
      'Stopped',
    ]);
    expect(host.lines.find(stateIs('Stopped'))).toMatchObject({ exitCode: 1 });
    expect([...(await committedOffsets(admin, names.groups['network-metrics'], names.topics['network-metrics'])).values()]).toEqual([
      -1n,
      -1n,
      -1n,
    ]);
    const { groups } = await admin.describeGroups([names.groups.reviews, names.groups['app-stats'], names.groups['network-metrics']]);
    expect(groups.map((group) => group.state)).toEqual(['Empty', 'Empty', 'Empty']);
  });

  it('takes a Ctrl-C relayed by npm and tsx (SIGINTs within 0.5 s) as one stop request: a clean stop, exit 0', async () => {
    // Prepare
    const names = await createTestPipelines('host-life-ctrlc');
    const host = spawnHost(await environment(names));
    await host.waitForLog(stateIs('Running'));

    // Act: what a terminal's Ctrl-C under `npm start` delivers
    for (let copy = 0; copy < 3; copy += 1) {
      host.child.kill('SIGINT');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }

    // Assess
    expect((await host.exited).code).toBe(0);
    expect(host.lines.filter((line) => line.message?.startsWith('stop signal received'))).toHaveLength(1);
    expect(host.lines.some((line) => line.message?.startsWith('second stop signal'))).toBe(false);
    expect(host.lines.find(stateIs('Stopped'))).toMatchObject({ exitCode: 0 });
  });

  it('refuses bad settings at start with exit 1, naming every one of them at once', async () => {
    // Prepare
    const names = await createTestPipelines('host-life-config');

    // Act: two bad values and a broken rule between settings
    const host = spawnHost(
      await environment(names, schema.url, {
        STORAGE_SESSION_TIMEOUT_MS: 'soon',
        STORAGE_DB_POOL_MAX: '0',
        STORAGE_FAILURE_RESPONSE: 'report',
        STORAGE_REPORT_BATCH_ITEM_FAILURES: 'false',
      }),
    );

    // Assess
    expect((await host.exited).code).toBe(1);
    const refusal = host.lines.find((line) => line.message === 'invalid configuration');
    expect(refusal).toMatchObject({ error: expect.stringContaining('3 invalid settings') });
    expect(refusal?.problems).toEqual([
      'STORAGE_DB_POOL_MAX="0" is invalid: must be from 1 to 100 connections',
      'STORAGE_SESSION_TIMEOUT_MS="soon" is invalid: must be a whole number',
      expect.stringContaining('STORAGE_FAILURE_RESPONSE=report needs STORAGE_REPORT_BATCH_ITEM_FAILURES=true'),
    ]);
  });

  it('migrates on start, keeps heartbeats fresh while idle, and gives up on a second signal', async () => {
    // Prepare: a schema with the App API's table only
    const fresh = await createTestSchema('hostmig');
    cleanups.push(() => fresh.drop());
    await createAppsStandIn(fresh.pool, [{ id: 1, package_name: 'com.example.weather' }]);
    const names = await createTestPipelines('host-life-mig');
    const env = await environment(names, fresh.url, { STORAGE_MIGRATE_ON_START: 'true' });
    const host = spawnHost(env);
    await host.waitForLog(stateIs('Running'));

    // Act / Assess: migrated, healthy while idle
    expect(host.lines.filter((line) => typeof line.state === 'string').map((line) => line.state)).toEqual(['Migrating', 'Running']);
    const { rows } = await fresh.pool.query("SELECT to_regclass('network_metrics')::text AS t");
    expect(rows).toEqual([{ t: 'network_metrics' }]);
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    expect(await runHealthcheck(env)).toMatchObject({ code: 0 });

    // Prepare: a batch in flight that cannot finish (its table locked), so the first signal's
    // stop is still waiting for it when the second comes (an idle host stops within milliseconds)
    const locker = await fresh.pool.connect();
    let released = false;
    const release = async () => {
      if (released) return;
      released = true;
      await locker.query('ROLLBACK').catch(() => undefined);
      locker.release();
    };
    cleanups.push(release);
    await locker.query('BEGIN');
    await locker.query('LOCK TABLE network_metrics IN ACCESS EXCLUSIVE MODE');
    const lockerPid = (await locker.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid;
    await produce(names.topics['network-metrics'], jsonMessages([sampleNetworkMetrics()]));
    const blockedSince = performance.now();
    const blocked = async () =>
      (
        await fresh.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))', [
          lockerPid,
        ])
      ).rows[0]?.n ?? 0;
    while ((await blocked()) === 0 && performance.now() - blockedSince < 30_000) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await blocked()).toBeGreaterThan(0);

    // Act / Assess: two signals in a row
    host.child.kill('SIGTERM');
    await host.waitForLog((line) => line.message?.startsWith('stop signal received') === true);
    host.child.kill('SIGTERM');
    expect((await host.exited).code).toBe(1);
    expect(host.lines.some((line) => line.message?.startsWith('second stop signal'))).toBe(true);
    await release();

    // Assess: without a host the heartbeats go stale, and the check names every pipeline
    await new Promise((resolve) => setTimeout(resolve, 200));
    const unhealthy = await runHealthcheck(env, ['--max-age', '100ms']);
    expect(unhealthy.code).toBe(1);
    for (const pipeline of PIPELINE_NAMES) expect(unhealthy.output).toContain(`unhealthy: ${pipeline}`);
  });
});
