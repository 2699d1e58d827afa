/**
 * Every state that can outlast a bound has its own rule (issue 26, docs/operations.md "The rules
 * behind the signals"), on the real broker and PostgreSQL with hosts as operators run them
 * (child processes), the bounds shortened through their settings, and each case staying longer
 * than the fail bound in the state it tests:
 *   - a pause longer than the fail bound, then a resume: the host stays, `/readyz` 200 throughout,
 *     the backlog drains;
 *   - a standby (more hosts than partitions) idle longer than the fail bound takes over when the
 *     owner stops (SIGTERM) and stores what is produced next;
 *   - a host started while `pipeline_pauses` is locked, and one started while PostgreSQL is down,
 *     store nothing of a paused pipeline: each waits, and fails at the bound if it must.
 * (A batch failing on the database and then the broker stopped: host-failing-redelivery.test.ts.)
 */
import net from 'node:net';
import type { Admin } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { freePorts } from '../../dev/free-ports.js';
import { runCli } from '../helpers/cli.js';
import { createMigratedSchema } from '../helpers/database.js';
import type { TestSchema } from '../helpers/database.js';
import {
  createTestPipelines,
  hostEnvironment,
  jsonMessages,
  killAllHosts,
  spawnHost,
  stateIs,
  temporaryDirectory,
  waitForCommittedToEnd,
  waitUntil,
} from '../helpers/host.js';
import type { HostLogLine, HostProcess, PipelineNames } from '../helpers/host.js';
import { createTestTopic, produce, testKafka } from '../helpers/kafka.js';
import { sampleAppStats, sampleReview } from '../helpers/messages.js';

const UNREADY_MS = 5_000;
const FAIL_MS = 10_000;
/** Each case stays this long in the state it tests: longer than the fail bound. */
const LONGER_THAN_FAIL_MS = FAIL_MS + 4_000;
const BOUNDS = { STORAGE_FETCH_UNREADY_AFTER_MS: String(UNREADY_MS), STORAGE_FETCH_FAIL_AFTER_MS: String(FAIL_MS) };

let schema: TestSchema;
let admin: Admin;
const cleanups: Array<() => Promise<void>> = [];

beforeAll(async () => {
  schema = await createMigratedSchema([{ id: 1, package_name: 'com.example.weather' }], 'longstates');
  admin = testKafka('host-long-states-test').admin();
  await admin.connect();
});

afterAll(async () => {
  await killAllHosts();
  for (const cleanup of cleanups.reverse()) await cleanup();
  await admin?.disconnect();
  await schema?.drop();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const reviews = (prefix: string, count: number) =>
  Array.from({ length: count }, (_, index) => ({ ...sampleReview(), review_id: `${prefix}:${index}` }));

/** Rows of `reviews` whose id starts with `prefix`. */
const reviewRows = async (prefix: string) =>
  Number((await schema.pool.query<{ n: string }>('SELECT count(*) AS n FROM reviews WHERE review_id LIKE $1', [`${prefix}:%`])).rows[0]?.n);

interface Host {
  readonly process: HostProcess;
  readonly base: string;
  readyz(): Promise<{ status: number; body: { ready: boolean; missing: string[]; pipelines: Record<string, { state: string }> } }>;
}

async function startHost(env: Record<string, string>): Promise<Host> {
  const [port] = await freePorts(1);
  const heartbeats = await temporaryDirectory('long-states-');
  cleanups.push(heartbeats.remove);
  const process = spawnHost({
    ...env,
    STORAGE_HEARTBEAT_DIR: heartbeats.path,
    STORAGE_HTTP_PORT: String(port),
    STORAGE_HTTP_HOST: '127.0.0.1',
  });
  const base = `http://127.0.0.1:${port}`;
  const readyz = async () => {
    const response = await fetch(`${base}/readyz`, { signal: AbortSignal.timeout(10_000) });
    return { status: response.status, body: (await response.json()) as Awaited<ReturnType<Host['readyz']>>['body'] };
  };
  return { process, base, readyz };
}

const environment = (names: PipelineNames, extra: Record<string, string> = {}, databaseUrl = schema.url) =>
  hostEnvironment({ databaseUrl, names, extra: { ...BOUNDS, ...extra } });

const line = (lines: readonly HostLogLine[], message: string) => lines.find((candidate) => candidate.message === message);
const brief = (entry: HostLogLine | undefined) => {
  if (entry === undefined) return 'none';
  const { timestamp: _timestamp, service: _service, component: _component, sampling_rate: _rate, stack: _stack, ...rest } = entry;
  return JSON.stringify(rest);
};

describe('states that outlast the fail bound', () => {
  it('a pause longer than the fail bound, then a resume: the host stays, /readyz 200 throughout, the backlog drains', async () => {
    // Prepare: one host of reviews, running and stored once
    const names = await createTestPipelines('long-pause');
    // Lag read every 500 ms and a stall bound shorter than the pause: the lag the backlog makes
    // during the pause must not read as a stall after the resume either.
    // The unready and stall bounds (8 s) leave a loaded CI machine room for the first fetch and store
    // after the resume; both stay shorter than the pause, which outlasts the fail bound too.
    const env = environment(names, {
      STORAGE_PIPELINES: 'reviews',
      STORAGE_LAG_INTERVAL_MS: '500',
      STORAGE_STALL_AFTER_MS: '8000',
      STORAGE_FETCH_UNREADY_AFTER_MS: '8000',
    });
    const host = await startHost(env);
    await host.process.waitForLog(stateIs('Running'), 90_000);
    await produce(names.topics.reviews, jsonMessages(reviews('before', 30)));
    await waitForCommittedToEnd(admin, names.groups.reviews, names.topics.reviews);
    await waitUntil('/readyz 200', async () => (await host.readyz()).status === 200, 30_000, 200);

    // Act: paused longer than the fail bound, a backlog produced meanwhile, then resumed
    const paused = await runCli(['pause', 'reviews', '--reason', 'longer than the fail bound'], env);
    expect(paused.code).toBe(0);
    await host.process.waitForLog((entry) => entry.message?.startsWith('pipeline paused') === true, 10_000);
    const answers: number[] = [];
    const notReady: string[] = [];
    let polling = true;
    const poll = (async () => {
      while (polling) {
        const answer = await host.readyz();
        answers.push(answer.status);
        if (answer.status !== 200) notReady.push(JSON.stringify(answer.body.missing));
        await sleep(100);
      }
    })();
    await produce(names.topics.reviews, jsonMessages(reviews('backlog', 400)));
    await sleep(LONGER_THAN_FAIL_MS);
    const duringPause = await host.readyz();
    expect(await reviewRows('backlog')).toBe(0);
    const resumed = await runCli(['resume', 'reviews'], env);
    const resumedAt = Date.now();
    expect(resumed.code).toBe(0);
    const resumedLine = await host.process.waitForLog((entry) => entry.message === 'pipeline resumed', 10_000);
    await waitUntil('the backlog stored', async () => (await reviewRows('backlog')) === 400, 30_000, 100);
    const drainedMs = Date.now() - resumedAt;
    await waitForCommittedToEnd(admin, names.groups.reviews, names.topics.reviews, 30_000);
    // The fail bound again, after the resume: nothing fails later either.
    await sleep(FAIL_MS + 2_000);
    polling = false;
    await poll;
    const after = await host.readyz();

    // Assess
    console.log(
      `[long-states] resume after a ${LONGER_THAN_FAIL_MS} ms pause (STORAGE_FETCH_FAIL_AFTER_MS=${FAIL_MS}): ` +
        `/readyz during the pause ${duringPause.status} ${JSON.stringify(duringPause.body)}; ${brief(resumedLine)}; ` +
        `backlog of 400 stored ${drainedMs} ms after the resume; /readyz answers from the pause to ${FAIL_MS + 2_000} ms after the drain: ` +
        `${answers.length}, of them not 200: ${answers.filter((status) => status !== 200).length}; /readyz now ${after.status} ` +
        `${JSON.stringify(after.body)}; host exit code ${String(host.process.child.exitCode)}`,
    );
    expect(duringPause.status).toBe(200);
    expect(duringPause.body.pipelines.reviews?.state).toBe('PAUSED');
    expect(host.process.child.exitCode).toBeNull();
    expect(answers.length).toBeGreaterThan(50);
    expect(notReady, '/readyz answers other than 200, with their causes').toEqual([]);
    expect(after).toMatchObject({ status: 200, body: { ready: true } });
    expect(line(host.process.lines, 'pipeline failed')).toBeUndefined();
    expect(line(host.process.lines, 'pipeline not fetching')).toBeUndefined();
    expect(line(host.process.lines, 'pipeline stalled')).toBeUndefined();
    host.process.child.kill('SIGTERM');
    expect((await host.process.exited).code).toBe(0);
  });

  it('a standby idle longer than the fail bound takes over when the owner stops (SIGTERM) and stores what comes next', async () => {
    // Prepare: reviews on a topic of one partition, two hosts: one owns it, one stands by
    const names = await createTestPipelines('long-standby');
    const topic = `${names.topics.reviews}-single`;
    await createTestTopic(topic, 1);
    const single: PipelineNames = { ...names, topics: { ...names.topics, reviews: topic } };
    // A long poll of 2.5 s: the first fetch after the take-over (nothing to read yet) completes
    // only then, so a rule that counted the standby's idle time would fail it meanwhile.
    const env = environment(single, { STORAGE_PIPELINES: 'reviews', STORAGE_POLL_TIMEOUT_MS: '2500' });
    const first = await startHost(env);
    await first.process.waitForLog(stateIs('Running'), 90_000);
    const second = await startHost(env);
    await second.process.waitForLog(stateIs('Running'), 90_000);
    const assignmentOf = (host: Host) => {
      const joins = host.process.lines.filter((entry) => entry.message === 'joined the consumer group');
      return (joins.at(-1)?.assignment as Record<string, number[]> | undefined)?.[topic] ?? [];
    };
    await waitUntil(
      'one owner and one standby',
      async () => {
        const { groups } = await admin.describeGroups([single.groups.reviews]);
        if (groups[0]?.state !== 'Stable' || groups[0].members.length !== 2) return false;
        return assignmentOf(first).length + assignmentOf(second).length === 1;
      },
      60_000,
      250,
    );
    const [owner, standby] = assignmentOf(first).length === 1 ? [first, second] : [second, first];
    await produce(topic, jsonMessages(reviews('owned', 20)));
    await waitUntil('the owner stores', async () => (await reviewRows('owned')) === 20, 30_000, 200);

    // Act: the standby idles longer than the fail bound, then the owner stops
    await sleep(LONGER_THAN_FAIL_MS);
    const standbyIdle = await standby.readyz();
    const stoppedAt = Date.now();
    owner.process.child.kill('SIGTERM');
    const ownerExit = await owner.process.exited;
    const takeover = await standby.process.waitForLog(
      (entry) =>
        entry.message === 'joined the consumer group' &&
        ((entry.assignment as Record<string, number[]> | undefined)?.[topic]?.length ?? 0) === 1,
      60_000,
    );
    const tookOverMs = Date.now() - stoppedAt;
    await produce(topic, jsonMessages(reviews('next', 50)));
    await waitUntil('the standby stores what comes next', async () => (await reviewRows('next')) === 50, 30_000, 200);
    await waitForCommittedToEnd(admin, single.groups.reviews, topic, 30_000);
    await sleep(FAIL_MS);
    const afterTakeover = await standby.readyz();

    // Assess
    console.log(
      `[long-states] standby idle ${LONGER_THAN_FAIL_MS} ms (STORAGE_FETCH_FAIL_AFTER_MS=${FAIL_MS}): /readyz ${standbyIdle.status} ` +
        `${JSON.stringify(standbyIdle.body)}; owner SIGTERM -> exit ${String(ownerExit.code)}; standby took over ${tookOverMs} ms later: ` +
        `${brief(takeover)}; 50 records produced next stored; /readyz ${FAIL_MS} ms later ${afterTakeover.status} ` +
        `${JSON.stringify(afterTakeover.body)}; standby exit code ${String(standby.process.child.exitCode)}`,
    );
    expect(standbyIdle).toMatchObject({ status: 200, body: { ready: true, pipelines: { reviews: { state: 'RUNNING' } } } });
    expect(ownerExit.code).toBe(0);
    expect(standby.process.child.exitCode).toBeNull();
    expect(afterTakeover).toMatchObject({ status: 200, body: { ready: true } });
    expect(line(standby.process.lines, 'pipeline failed')).toBeUndefined();
    standby.process.child.kill('SIGTERM');
    expect((await standby.process.exited).code).toBe(0);
  });

  it('a host started while pipeline_pauses is locked stores nothing of a paused pipeline: it waits, then fails at the bound', async () => {
    // Prepare: reviews paused, the pause table locked, a backlog on the topic
    const names = await createTestPipelines('long-locked');
    const env = environment(names, { STORAGE_PIPELINES: 'reviews,app-stats', STORAGE_DB_STATEMENT_TIMEOUT_MS: '1000' });
    expect((await runCli(['pause', 'reviews', '--reason', 'locked at the start'], env)).code).toBe(0);
    await produce(names.topics.reviews, jsonMessages(reviews('locked', 300)));
    await produce(names.topics['app-stats'], jsonMessages([sampleAppStats()]));
    const locker = await schema.pool.connect();
    let locked = true;
    // Released whatever happens, at the end of this case: a lock left behind would hold up the next ones.
    onTestFinished(async () => {
      if (locked) await locker.query('ROLLBACK').catch(() => undefined);
      locker.release();
    });
    await locker.query('BEGIN');
    await locker.query('LOCK TABLE pipeline_pauses IN ACCESS EXCLUSIVE MODE');

    // Act: a host starts under the lock, which is held longer than the fail bound
    const startedAt = Date.now();
    const host = await startHost(env);
    const waiting = await host.process.waitForLog((entry) => entry.message?.startsWith('cannot read the pause state') === true, 60_000);
    await host.process.waitForLog(stateIs('Running'), 60_000);
    const notReady = await waitUntil(
      'not ready, saying why',
      async () => {
        const answer = await host.readyz();
        return answer.status === 503 && answer.body.missing.some((cause) => cause.includes('pause state not read yet'))
          ? answer
          : undefined;
      },
      10_000,
      200,
    );
    const exit = await Promise.race([host.process.exited, sleep(LONGER_THAN_FAIL_MS + 30_000).then(() => undefined)]);
    const exitedMs = Date.now() - startedAt;
    const storedUnderLock = await reviewRows('locked');
    const failed = line(host.process.lines, 'pipeline failed');
    await locker.query('ROLLBACK');
    locked = false;

    // Then, with the table readable again, a new host stays paused longer than the fail bound ...
    const next = await startHost(env);
    const pausedLine = await next.process.waitForLog((entry) => entry.message?.startsWith('pipeline paused') === true, 60_000);
    await next.process.waitForLog(stateIs('Running'), 60_000);
    await sleep(LONGER_THAN_FAIL_MS);
    const storedWhilePaused = await reviewRows('locked');
    const readyWhilePaused = await next.readyz();
    // ... and stores the backlog once resumed.
    expect((await runCli(['resume', 'reviews'], env)).code).toBe(0);
    await waitUntil('the backlog stored after the resume', async () => (await reviewRows('locked')) === 300, 30_000, 200);

    // Assess
    console.log(
      `[long-states] started under a lock on pipeline_pauses: ${brief(waiting)}; /readyz ${notReady.status} ${JSON.stringify(notReady.body)}; ` +
        `exit ${String(exit?.code)} ${exitedMs} ms after the start; ${brief(failed)}; reviews stored under the lock: ${storedUnderLock} of 300; ` +
        `after the lock: ${brief(pausedLine)}; stored while paused ${LONGER_THAN_FAIL_MS} ms: ${storedWhilePaused}; /readyz ` +
        `${readyWhilePaused.status} ${JSON.stringify(readyWhilePaused.body)}; after the resume: 300`,
    );
    expect(waiting).toMatchObject({ level: 'WARN', message: 'cannot read the pause state; no pipeline fetches until it is read once' });
    expect(exit?.code).toBe(1);
    expect(storedUnderLock).toBe(0);
    expect(String(failed?.error)).toMatch(/pause state not read yet \(cannot read pipeline_pauses: .+\), nothing fetched for \d+ s/);
    expect(exitedMs).toBeGreaterThan(FAIL_MS);
    expect(storedWhilePaused).toBe(0);
    expect(readyWhilePaused).toMatchObject({ status: 200, body: { pipelines: { reviews: { state: 'PAUSED' } } } });
    next.process.child.kill('SIGTERM');
    expect((await next.process.exited).code).toBe(0);
  });

  it('a host started while PostgreSQL is down stores nothing of a paused pipeline: it waits, and fails at the bound if it must', async () => {
    // Prepare: reviews paused, a backlog on the topic, a database address where nothing listens (yet)
    const names = await createTestPipelines('long-pgdown');
    const [port] = await freePorts(1);
    const down = new URL(schema.url);
    down.hostname = '127.0.0.1';
    down.port = String(port);
    const real = new URL(schema.url);
    const extra = { STORAGE_PIPELINES: 'reviews,app-stats', STORAGE_DB_CONNECT_TIMEOUT_MS: '1000' };
    expect((await runCli(['pause', 'reviews', '--reason', 'database down at the start'], environment(names, extra))).code).toBe(0);
    await produce(names.topics.reviews, jsonMessages(reviews('pgdown', 300)));
    const stats = Array.from({ length: 5 }, (_, index) => ({ ...sampleAppStats(), crawled_at: `2026-11-29T0${index + 1}:00:00Z` }));
    await produce(names.topics['app-stats'], jsonMessages(stats));
    const statsBefore = Number((await schema.pool.query<{ n: string }>('SELECT count(*) AS n FROM app_stats')).rows[0]?.n);

    // Act 1: PostgreSQL stays down longer than the fail bound
    const startedAt = Date.now();
    const first = await startHost(environment(names, extra, down.toString()));
    const waiting = await first.process.waitForLog((entry) => entry.message?.startsWith('cannot read the pause state') === true, 60_000);
    const exit = await Promise.race([first.process.exited, sleep(LONGER_THAN_FAIL_MS + 30_000).then(() => undefined)]);
    const exitedMs = Date.now() - startedAt;
    const failed = line(first.process.lines, 'pipeline failed');

    // Act 2: another host started while it is down; PostgreSQL comes back within the bound (a
    // forwarder on the address), and the host stays longer than the fail bound after that
    const second = await startHost(environment(names, extra, down.toString()));
    await second.process.waitForLog((entry) => entry.message?.startsWith('cannot read the pause state') === true, 60_000);
    await second.process.waitForLog(stateIs('Running'), 60_000);
    const forwarder = net.createServer((client) => {
      const upstream = net.connect(Number(real.port || 5432), real.hostname);
      client.pipe(upstream).pipe(client);
      client.on('error', () => upstream.destroy());
      upstream.on('error', () => client.destroy());
    });
    await new Promise<void>((resolve) => forwarder.listen(port, '127.0.0.1', resolve));
    cleanups.push(() => new Promise<void>((resolve) => forwarder.close(() => resolve())));
    const pausedLine = await second.process.waitForLog((entry) => entry.message?.startsWith('pipeline paused') === true, 30_000);
    await sleep(LONGER_THAN_FAIL_MS);
    const storedReviews = await reviewRows('pgdown');
    const statsAfter = Number((await schema.pool.query<{ n: string }>('SELECT count(*) AS n FROM app_stats')).rows[0]?.n);
    const ready = await second.readyz();

    // Assess
    console.log(
      `[long-states] started while PostgreSQL is down: ${brief(waiting)}; exit ${String(exit?.code)} ${exitedMs} ms after the start; ` +
        `${brief(failed)}; a second host, PostgreSQL back: ${brief(pausedLine)}; reviews stored ${LONGER_THAN_FAIL_MS} ms later: ` +
        `${storedReviews} of 300; app-stats rows ${statsBefore} -> ${statsAfter}; /readyz ${ready.status} ${JSON.stringify(ready.body)}`,
    );
    expect(exit?.code).toBe(1);
    expect(exitedMs).toBeGreaterThan(FAIL_MS);
    expect(String(failed?.error)).toMatch(
      /pause state not read yet \(cannot read pipeline_pauses: ECONNREFUSED\), nothing fetched for \d+ s/,
    );
    expect(storedReviews).toBe(0);
    expect(statsAfter - statsBefore).toBe(stats.length);
    expect(ready).toMatchObject({ status: 200, body: { pipelines: { reviews: { state: 'PAUSED' }, 'app-stats': { state: 'RUNNING' } } } });
    expect(second.process.child.exitCode).toBeNull();
    second.process.child.kill('SIGTERM');
    expect((await second.process.exited).code).toBe(0);
  });
});
