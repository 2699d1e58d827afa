/**
 * Pause, resume and status on the real broker and PostgreSQL, with hosts as operators run them
 * (child processes): two hosts share the reviews group; a pause through one host's HTTP endpoint
 * stops both within 5 s while the other pipelines keep storing; a restarted host stays paused;
 * a resume through the CLI lets both catch up with nothing lost or stored twice. The control
 * token's cases, `status` with both members, and a pause that meets a batch in flight.
 */
import type { Admin } from 'kafkajs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { freePorts } from '../../dev/free-ports.js';
import { PIPELINE_NAMES } from '../../shared/pipelines.js';
import type { PipelineName } from '../../shared/pipelines.js';
import { runCli } from '../helpers/cli.js';
import {
  closeHostTestStack,
  committedOffsets,
  createTestPipelines,
  hostEnvironment,
  jsonMessages,
  killAllHosts,
  openHostTestStack,
  spawnHost,
  stateIs,
  waitForCommittedToEnd,
  waitUntil,
} from '../helpers/host.js';
import type { HostLogLine, HostTestStack } from '../helpers/host.js';
import { produce } from '../helpers/kafka.js';
import { sampleAppStats, sampleNetworkMetrics, sampleReview } from '../helpers/messages.js';

const TOKEN = 'test-control-token-0123456789abcdef';

let stack: HostTestStack;
let admin: Admin;
const stops: Array<{ stop(): Promise<unknown> }> = [];

beforeAll(async () => {
  stack = await openHostTestStack('host-pause');
  admin = stack.admin;
});

afterAll(async () => {
  await killAllHosts();
  await closeHostTestStack(stack, stops);
});

interface Answer {
  readonly status: number;
  readonly body: Record<string, unknown>;
}

async function call(base: string, method: 'GET' | 'PUT', path: string, options: { token?: string; body?: unknown } = {}): Promise<Answer> {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: options.token === undefined ? {} : { authorization: `Bearer ${options.token}` },
    ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

/** Reviews stored whose id starts with `prefix` (each test writes its own). */
const reviewsCount = async (prefix: string) =>
  Number(
    (await stack.schema.pool.query<{ n: string }>('SELECT count(*) AS n FROM reviews WHERE review_id LIKE $1', [`${prefix}%`])).rows[0]?.n,
  );
const tableCount = async (table: string) =>
  Number((await stack.schema.pool.query<{ n: string }>(`SELECT count(*) AS n FROM ${table}`)).rows[0]?.n);

const reviews = (prefix: string, count: number) =>
  Array.from({ length: count }, (_, index) => ({ ...sampleReview(), review_id: `${prefix}:${index}` }));

/** The records of every `batch stored` line of a pipeline in a host's log. */
const storedRecords = (lines: readonly HostLogLine[], pipeline: PipelineName) =>
  lines
    .filter((line) => line.message === 'batch stored' && line.pipeline === pipeline)
    .reduce((sum, line) => sum + Number(line.records), 0);

/** The state `GET /pipelines` gives for a pipeline. */
/** One pipeline's value of a metric on a host's /metrics (`extra`: more labels, e.g. `,state="PAUSED"`). */
async function metricOn(base: string, name: string, pipeline: PipelineName, extra = ''): Promise<number | undefined> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const line = text.split('\n').find((each) => each.startsWith(`${name}{pipeline="${pipeline}"${extra}} `));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
}

/** When the pause row of `pipeline` was written, Unix seconds. */
async function pauseRowSeconds(pipeline: PipelineName): Promise<number> {
  const { rows } = await stack.schema.pool.query<{ at: Date }>('SELECT at FROM pipeline_pauses WHERE pipeline = $1', [pipeline]);
  return (rows[0]?.at.getTime() ?? Number.NaN) / 1000;
}

async function stateOn(base: string, pipeline: PipelineName): Promise<string | undefined> {
  const { body } = await call(base, 'GET', '/pipelines');
  return (body.pipelines as Array<{ pipeline: string; state: string }>).find((entry) => entry.pipeline === pipeline)?.state;
}

describe('pause and resume for every host', () => {
  // Every test starts its own two hosts on its own topics and groups, from an empty pause table,
  // and ends them: no test depends on what another left behind.
  afterEach(async () => {
    await killAllHosts();
  });

  /**
   * Host A runs every pipeline (control on), host B only reviews (control off), both in the
   * reviews group, with 300 reviews (`<prefix>-first:*`) stored and committed; `pause`: then
   * paused through host A's endpoint (reason `integration test`) and PAUSED on both hosts.
   */
  async function twoHosts(prefix: string, pause: boolean) {
    await stack.schema.pool.query('DELETE FROM pipeline_pauses');
    const { rows } = await stack.schema.pool.query<{ id: string }>('SELECT coalesce(max(id), 0) AS id FROM operator_actions');
    const actionsAfter = Number(rows[0]?.id);
    const names = await createTestPipelines(prefix);
    const [portA, portB] = await freePorts(2);
    const baseA = `http://127.0.0.1:${portA}`;
    const baseB = `http://127.0.0.1:${portB}`;
    const common = { databaseUrl: stack.schema.url, names, heartbeatDir: stack.heartbeats.path };
    const envA = hostEnvironment({
      ...common,
      extra: { STORAGE_HTTP_PORT: String(portA), STORAGE_HTTP_HOST: '127.0.0.1', STORAGE_HTTP_CONTROL_TOKEN: TOKEN },
    });
    const envB = hostEnvironment({
      ...common,
      extra: { STORAGE_HTTP_PORT: String(portB), STORAGE_HTTP_HOST: '127.0.0.1', STORAGE_PIPELINES: 'reviews' },
    });
    const hostA = spawnHost(envA);
    const hostB = spawnHost(envB);
    await Promise.all([hostA.waitForLog(stateIs('Running'), 90_000), hostB.waitForLog(stateIs('Running'), 90_000)]);
    const bothInGroup = () =>
      waitUntil(
        'both hosts own reviews partitions',
        async () => {
          const { groups } = await admin.describeGroups([names.groups.reviews]);
          return groups[0]?.state === 'Stable' && groups[0].members.length === 2;
        },
        60_000,
        250,
      );
    await bothInGroup();
    await produce(names.topics.reviews, jsonMessages(reviews(`${prefix}-first`, 300), { key: (index) => `first:${index}` }));
    await waitForCommittedToEnd(admin, names.groups.reviews, names.topics.reviews);
    const count = () => reviewsCount(`${prefix}-`);
    expect(await count()).toBe(300);
    const setup = { names, baseA, baseB, envA, envB, hostA, hostB, count, actionsAfter, bothInGroup };
    if (!pause) return { ...setup, answer: undefined, pausedAt: Number.NaN };
    const pausedAt = Date.now();
    const answer = await call(baseA, 'PUT', '/pipelines/reviews/pause', { token: TOKEN, body: { reason: 'integration test' } });
    await waitUntil(
      'both hosts report reviews PAUSED',
      async () => (await stateOn(baseA, 'reviews')) === 'PAUSED' && (await stateOn(baseB, 'reviews')) === 'PAUSED',
      5_000,
      100,
    );
    return { ...setup, answer, pausedAt };
  }

  it('two hosts share the reviews group; a pause through one stops both within 5 s, the others keep storing', async () => {
    // Prepare and act: two hosts, 300 reviews stored, then a pause through host A's endpoint
    const { names, baseA, baseB, count, answer, pausedAt } = await twoHosts('pause-both', true);

    // Assess: accepted, and both hosts said PAUSED within 5 s
    expect(answer).toMatchObject({
      status: 202,
      body: { pipeline: 'reviews', paused: true, was_paused: false, reason: 'integration test' },
    });
    expect(Date.now() - pausedAt).toBeLessThan(5_000);
    const committedAtPause = await committedOffsets(admin, names.groups.reviews, names.topics.reviews);

    // New data on every topic: reviews wait, the others are stored
    await produce(names.topics.reviews, jsonMessages(reviews('pause-both-second', 300), { key: (index) => `second:${index}` }));
    await produce(names.topics['app-stats'], jsonMessages([sampleAppStats(), { ...sampleAppStats(), crawled_at: '2026-11-30T07:00:00Z' }]));
    await produce(names.topics['network-metrics'], jsonMessages([sampleNetworkMetrics()]));
    await waitForCommittedToEnd(admin, names.groups['app-stats'], names.topics['app-stats']);
    await waitForCommittedToEnd(admin, names.groups['network-metrics'], names.topics['network-metrics']);
    expect(await tableCount('app_stats')).toBe(2);
    expect(await tableCount('network_metrics')).toBe(1);
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    expect(await count()).toBe(300);
    expect(await committedOffsets(admin, names.groups.reviews, names.topics.reviews)).toEqual(committedAtPause);

    // Still members, still ready, and said so
    const { groups } = await admin.describeGroups([names.groups.reviews]);
    expect(groups[0]?.members).toHaveLength(2);
    for (const base of [baseA, baseB]) {
      const ready = await call(base, 'GET', '/readyz');
      expect(ready.status).toBe(200);
      expect((ready.body.pipelines as Record<string, { paused: boolean }>).reviews?.paused).toBe(true);
    }
    const other = await call(baseA, 'GET', '/pipelines');
    expect(other.body.pipelines).toEqual(
      expect.arrayContaining([expect.objectContaining({ pipeline: 'app-stats', state: 'RUNNING', paused: false })]),
    );
    // /metrics on both hosts: paused 1 since the pause row's time, up 0, state PAUSED
    const pausedSince = await pauseRowSeconds('reviews');
    expect(Math.abs(pausedSince - pausedAt / 1000)).toBeLessThan(5);
    for (const base of [baseA, baseB]) {
      expect(await metricOn(base, 'storage_consumer_pipeline_paused', 'reviews')).toBe(1);
      expect(await metricOn(base, 'storage_consumer_pipeline_paused_since_timestamp_seconds', 'reviews')).toBe(pausedSince);
      // The deprecated name, kept for one release, carries the same value.
      expect(await metricOn(base, 'storage_consumer_pipeline_paused_since_seconds', 'reviews')).toBe(pausedSince);
      expect(await metricOn(base, 'storage_consumer_pipeline_up', 'reviews')).toBe(0);
      expect(await metricOn(base, 'storage_consumer_pipeline_state', 'reviews', ',state="PAUSED"')).toBe(1);
    }
    // Host B runs reviews only; host A's app-stats runs, unpaused.
    expect(await metricOn(baseA, 'storage_consumer_pipeline_paused', 'app-stats')).toBe(0);
    expect(await metricOn(baseA, 'storage_consumer_pipeline_paused_since_timestamp_seconds', 'app-stats')).toBe(0);
    expect(await metricOn(baseA, 'storage_consumer_pipeline_up', 'app-stats')).toBe(1);
  }, 240_000);

  it('answers control only with the right token: none configured 403, missing or wrong 401; GET needs none', async () => {
    const { baseA, baseB } = await twoHosts('pause-token', true);

    expect((await call(baseB, 'PUT', '/pipelines/reviews/resume', { token: TOKEN })).status).toBe(403);
    const missing = await call(baseA, 'PUT', '/pipelines/reviews/resume');
    expect(missing.status).toBe(401);
    const wrong = await call(baseA, 'PUT', '/pipelines/reviews/resume', { token: `${TOKEN}x` });
    expect(wrong.status).toBe(401);
    expect(JSON.stringify(wrong.body)).not.toContain(TOKEN);
    expect((await call(baseA, 'PUT', '/pipelines/reviews/resume', { token: 'short' })).status).toBe(401);
    expect((await call(baseA, 'PUT', '/pipelines/nothing/pause', { token: TOKEN })).status).toBe(404);
    const unknown = await call(baseA, 'GET', '/pipelines/nothing/status');
    expect(unknown).toMatchObject({ status: 404, body: { error: expect.stringContaining('unknown pipeline') } });
    expect((await call(baseB, 'GET', '/pipelines/app-stats/status')).status).toBe(404);
    // None of the refused calls resumed anything
    expect(await stateOn(baseA, 'reviews')).toBe('PAUSED');
  }, 240_000);

  it('a restarted host stays paused', async () => {
    const { baseB, envB, hostB, count, bothInGroup } = await twoHosts('pause-restart', true);

    hostB.child.kill('SIGTERM');
    expect((await hostB.exited).code).toBe(0);
    const restarted = spawnHost(envB);
    await restarted.waitForLog(stateIs('Running'), 90_000);
    await bothInGroup();

    expect(await stateOn(baseB, 'reviews')).toBe('PAUSED');
    // The pause's start is the row's, not the restart's: a forgotten pause stays forgotten.
    expect(await metricOn(baseB, 'storage_consumer_pipeline_paused_since_timestamp_seconds', 'reviews')).toBe(
      await pauseRowSeconds('reviews'),
    );
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    expect(await count()).toBe(300);
    expect(storedRecords(restarted.lines, 'reviews')).toBe(0);
  }, 240_000);

  it('status shows both members with their partitions and the pause', async () => {
    const { baseA, envA } = await twoHosts('pause-status', true);

    const env = { ...envA, STORAGE_PIPELINES: 'reviews' };
    const text = await runCli(['status'], env);
    const json = await runCli(['status', '--json', '--host', baseA], env);
    console.log(`storage-consumer status (two hosts, paused):\n${text.stdout}`);

    expect(text.code).toBe(0);
    expect(text.stdout).toContain('PAUSED by http:127.0.0.1');
    expect(text.stdout).toContain('integration test');
    expect(json.code).toBe(0);
    const [view] = (
      JSON.parse(json.stdout) as {
        pipelines: Array<{
          members: Array<{ memberId: string; partitions: number[] }>;
          pause: { paused: boolean; reason: string };
          host: { state: string; member_id: string };
        }>;
      }
    ).pipelines;
    expect(view?.members).toHaveLength(2);
    expect(view?.members.flatMap((member) => member.partitions).sort()).toEqual([0, 1, 2]);
    for (const member of view?.members ?? []) {
      expect(member.partitions.length).toBeGreaterThan(0);
      expect(text.stdout).toContain(member.memberId);
    }
    expect(view?.pause).toMatchObject({ paused: true, reason: 'integration test' });
    expect(view?.host.state).toBe('PAUSED');
    expect(view?.members.map((member) => member.memberId)).toContain(view?.host.member_id);
  }, 240_000);

  it('resume through the CLI: both hosts catch up, nothing lost, nothing stored twice', async () => {
    // Prepare: paused, and 300 more reviews waiting
    const { names, baseA, baseB, envA, hostA, hostB, count, actionsAfter } = await twoHosts('pause-resume', true);
    await produce(names.topics.reviews, jsonMessages(reviews('pause-resume-second', 300), { key: (index) => `second:${index}` }));
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    expect(await count()).toBe(300);

    // Act
    const resumed = await runCli(['resume', 'reviews'], envA);
    expect(resumed.code).toBe(0);
    const resumedAt = Date.now();

    // Assess
    await waitUntil('reviews stored again', async () => (await count()) > 300, 5_000, 100);
    expect(Date.now() - resumedAt).toBeLessThan(5_000);
    await waitForCommittedToEnd(admin, names.groups.reviews, names.topics.reviews);
    expect(await count()).toBe(600);
    expect(await tableCount('dead_letter_events')).toBe(0);
    // Every record went through exactly one stored batch: no batch was redelivered.
    expect(storedRecords(hostA.lines, 'reviews') + storedRecords(hostB.lines, 'reviews')).toBe(600);
    // Both hosts took part in the catch-up.
    expect(storedRecords(hostA.lines, 'reviews')).toBeGreaterThan(0);
    expect(storedRecords(hostB.lines, 'reviews')).toBeGreaterThan(0);

    const { rows } = await stack.schema.pool.query<{ actor: string; command: string; via: string }>(
      "SELECT actor, command, arguments->>'via' AS via FROM operator_actions WHERE arguments->>'pipeline' = 'reviews' AND id > $1 ORDER BY id",
      [actionsAfter],
    );
    expect(rows).toEqual([
      { actor: 'http:127.0.0.1', command: 'pause', via: 'http' },
      { actor: expect.any(String), command: 'resume', via: 'cli' },
    ]);
    for (const name of PIPELINE_NAMES) expect(await stateOn(baseA, name)).toBe('RUNNING');
    for (const base of [baseA, baseB]) {
      expect(await metricOn(base, 'storage_consumer_pipeline_paused', 'reviews')).toBe(0);
      expect(await metricOn(base, 'storage_consumer_pipeline_paused_since_timestamp_seconds', 'reviews')).toBe(0);
    }
  }, 240_000);
});

describe('a pause that meets a batch in flight', () => {
  it('lets the batch finish and commit, then fetches nothing until the resume', async () => {
    // Prepare: no pause, 20 reviews on partition 0, and the reviews table locked so that their batch waits
    await stack.schema.pool.query('DELETE FROM pipeline_pauses');
    const names = await createTestPipelines('pause-inflight');
    const [port] = await freePorts(1);
    const base = `http://127.0.0.1:${port}`;
    await produce(names.topics.reviews, jsonMessages(reviews('inflight-a', 20), { partition: 0 }));
    const locker = await stack.schema.pool.connect();
    await locker.query('BEGIN');
    await locker.query('LOCK TABLE reviews IN EXCLUSIVE MODE');
    const env = hostEnvironment({
      databaseUrl: stack.schema.url,
      names,
      heartbeatDir: stack.heartbeats.path,
      extra: {
        STORAGE_HTTP_PORT: String(port),
        STORAGE_HTTP_HOST: '127.0.0.1',
        STORAGE_HTTP_CONTROL_TOKEN: TOKEN,
        STORAGE_PIPELINES: 'reviews',
      },
    });
    const host = spawnHost(env);
    stops.push({ stop: async () => host.child.kill('SIGTERM') });
    const inflight = async () =>
      Number(
        (await stack.schema.pool.query<{ n: string }>("SELECT count(*) AS n FROM reviews WHERE review_id LIKE 'inflight-%'")).rows[0]?.n,
      );
    const committed = async () => (await committedOffsets(admin, names.groups.reviews, names.topics.reviews)).get(0);
    try {
      await host.waitForLog(stateIs('Running'), 90_000);
      await waitUntil(
        'the batch waits for the lock',
        async () => {
          const { rows } = await stack.schema.pool.query<{ n: string }>(
            "SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query ILIKE '%INSERT INTO reviews%'",
          );
          return Number(rows[0]?.n) > 0;
        },
        60_000,
        100,
      );

      // Act: pause while the batch is in flight, then produce more, then let the batch go
      const answer = await call(base, 'PUT', '/pipelines/reviews/pause', { token: TOKEN });
      expect(answer.status).toBe(202);
      await waitUntil('reviews PAUSED', async () => (await stateOn(base, 'reviews')) === 'PAUSED', 5_000, 100);
      // The status names the batch that is still in flight, on the partition this host owns
      const during = await call(base, 'GET', '/pipelines/reviews/status');
      console.log(`GET /pipelines/reviews/status, paused with a batch in flight:\n${JSON.stringify(during.body, null, 2)}`);
      const partition0 = (during.body.partitions as Array<Record<string, unknown>>).find((entry) => entry.partition === 0);
      // The row names the caller's address; the answer, like every HTTP answer, shows none
      expect(during.body).toMatchObject({ state: 'PAUSED', pause: { by: 'http:<address>' } });
      expect(partition0).toMatchObject({ owner: { this_host: true }, in_flight: { first_offset: '0', last_offset: '19', attempt: 1 } });
      await produce(names.topics.reviews, jsonMessages(reviews('inflight-b', 20), { partition: 0 }));
      await locker.query('COMMIT');
    } finally {
      locker.release();
    }

    // Assess: the batch in flight was stored and committed; nothing after it
    await waitUntil('the batch in flight committed', async () => (await committed()) === 20n, 30_000, 100);
    expect(await inflight()).toBe(20);
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    expect(await inflight()).toBe(20);
    expect(await committed()).toBe(20n);
    const after = await call(base, 'GET', '/pipelines/reviews/status');
    expect((after.body.partitions as Array<Record<string, unknown>>).find((entry) => entry.partition === 0)).toMatchObject({
      committed: '20',
      end: '40',
      lag: 20,
      in_flight: null,
      last_stored_at: expect.any(String),
    });

    // Resume: the rest follows
    expect((await call(base, 'PUT', '/pipelines/reviews/resume', { token: TOKEN })).status).toBe(202);
    await waitUntil('the rest committed', async () => (await committed()) === 40n, 30_000, 100);
    expect(await inflight()).toBe(40);
    expect(storedRecords(host.lines, 'reviews')).toBe(40);
  }, 180_000);
});
