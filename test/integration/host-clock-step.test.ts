/**
 * Membership does not depend on the wall clock (issue 38, item 7): kafkajs decides whether a
 * group heartbeat is due on `Date.now()`, so a host whose wall clock steps back two hours sent
 * none for two hours, and once its partitions were quiet past the session timeout the broker
 * dropped it while it went on fetching. Here a host of one pipeline (the real broker and
 * PostgreSQL) stores records, its wall clock alone steps back two hours (a preload in its
 * process, test/helpers/wall-clock-step.ts; `performance.now()` untouched), and it stays quiet
 * for five session timeouts: the broker still lists the same member in a Stable group, the host
 * never joined again, and it stores and commits what is produced next, then stops with exit 0.
 */
import type { Admin } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { freePorts } from '../../dev/free-ports.js';
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
import type { HostLogLine } from '../helpers/host.js';
import { produce, testKafka } from '../helpers/kafka.js';
import { sampleReview } from '../helpers/messages.js';
import { wallClockStepCommand } from '../helpers/wall-clock-step.js';

const SESSION_TIMEOUT_MS = 6_000;
/** Quiet after the step: five session timeouts. */
const QUIET_MS = 5 * SESSION_TIMEOUT_MS;
const TWO_HOURS_BACK_MS = -2 * 60 * 60 * 1_000;

let schema: TestSchema;
let admin: Admin;
let heartbeats: { path: string; remove: () => Promise<void> } | undefined;

beforeAll(async () => {
  schema = await createMigratedSchema([{ id: 1, package_name: 'com.example.weather' }], 'clockstep');
  admin = testKafka('host-clock-step-test').admin();
  await admin.connect();
  heartbeats = await temporaryDirectory('clock-step-');
});

afterAll(async () => {
  await killAllHosts();
  await admin?.disconnect();
  await schema?.drop();
  await heartbeats?.remove();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const reviews = (prefix: string, count: number) =>
  Array.from({ length: count }, (_, index) => ({ ...sampleReview(), review_id: `${prefix}:${index}` }));

const reviewRows = async (prefix: string) =>
  Number((await schema.pool.query<{ n: string }>('SELECT count(*) AS n FROM reviews WHERE review_id LIKE $1', [`${prefix}:%`])).rows[0]?.n);

const joins = (lines: readonly HostLogLine[]) => lines.filter((line) => line.message === 'joined the consumer group');

/** The group as the broker describes it: its state and each member's id and client id. */
async function describeGroup(group: string): Promise<{ state: string; members: Array<{ memberId: string; clientId: string }> }> {
  const { groups } = await admin.describeGroups([group]);
  const described = groups[0];
  return {
    state: described?.state ?? 'unknown',
    members: (described?.members ?? []).map(({ memberId, clientId }) => ({ memberId, clientId })),
  };
}

describe('a host whose wall clock steps back two hours', () => {
  it('stays in its group through quiet minutes, then stores and commits what comes next and stops with exit 0', async () => {
    // Prepare: a host of reviews, its wall clock steppable; a few records stored and committed
    const names = await createTestPipelines('clock-step');
    const [port] = await freePorts(1);
    const env = hostEnvironment({
      databaseUrl: schema.url,
      names,
      heartbeatDir: heartbeats?.path,
      extra: {
        STORAGE_PIPELINES: 'reviews',
        STORAGE_SESSION_TIMEOUT_MS: String(SESSION_TIMEOUT_MS),
        STORAGE_HTTP_PORT: String(port),
        STORAGE_HTTP_HOST: '127.0.0.1',
        TEST_WALL_CLOCK_STEP_MS: String(TWO_HOURS_BACK_MS),
      },
    });
    const host = spawnHost(env, wallClockStepCommand());
    onTestFailed(() =>
      console.log(
        `[clock-step] the host's last lines:\n${host.lines
          .slice(-25)
          .map((line) => JSON.stringify(line))
          .join('\n')}`,
      ),
    );
    await host.waitForLog(stateIs('Running'), 90_000);
    await produce(names.topics.reviews, jsonMessages(reviews('before', 12)));
    await waitForCommittedToEnd(admin, names.groups.reviews, names.topics.reviews, 60_000);
    const before = await waitUntil(
      'one Stable member',
      async () => {
        const group = await describeGroup(names.groups.reviews);
        return group.state === 'Stable' && group.members.length === 1 && group.members[0] !== undefined && group;
      },
      30_000,
      250,
    );
    const joinsBefore = joins(host.lines).length;

    // Act: the host's wall clock steps back two hours; nothing is produced for five session timeouts
    host.child.kill('SIGUSR2');
    const stepped = await host.waitForLog((line) => line.message === 'test: wall clock stepped', 10_000);
    const during: string[] = [];
    for (let waited = 0; waited < QUIET_MS; waited += SESSION_TIMEOUT_MS) {
      await sleep(SESSION_TIMEOUT_MS);
      const group = await describeGroup(names.groups.reviews);
      during.push(`${group.state}:${group.members.map((member) => member.memberId).join(',') || 'no member'}`);
    }
    const after = await describeGroup(names.groups.reviews);
    const readyz = await fetch(`http://127.0.0.1:${port}/readyz`, { signal: AbortSignal.timeout(10_000) });
    const readyzBody = (await readyz.text()).trim();
    console.log(
      `[clock-step] ${JSON.stringify(stepped)}\n` +
        `[clock-step] group ${names.groups.reviews} before the step: ${JSON.stringify(before)}\n` +
        `[clock-step] every ${SESSION_TIMEOUT_MS} ms after it: ${during.join(' | ')}\n` +
        `[clock-step] ${QUIET_MS} ms after it: ${JSON.stringify(after)}; /readyz ${readyz.status} ${readyzBody}`,
    );

    // Assess: the same member, in a Stable group, all along; the host ready
    const member = before.members[0]?.memberId;
    expect(during).toEqual(Array.from({ length: QUIET_MS / SESSION_TIMEOUT_MS }, () => `Stable:${member}`));
    expect(after).toEqual(before);
    expect(readyz.status).toBe(200);

    // Act: records again, then a stop
    await produce(names.topics.reviews, jsonMessages(reviews('after', 12)));
    const committed = await waitForCommittedToEnd(admin, names.groups.reviews, names.topics.reviews, 60_000);
    const stored = await waitUntil('the later records stored', async () => (await reviewRows('after')) === 12 && 12, 30_000, 200);
    const last = await describeGroup(names.groups.reviews);
    const runningAfter = host.child.exitCode === null;
    host.child.kill('SIGTERM');
    const exit = await host.exited;

    // Assess: stored and committed by the same member, which never joined again, and a clean stop
    console.log(
      `[clock-step] later records: ${stored} stored, committed ${JSON.stringify(Object.fromEntries([...committed].map(([p, o]) => [p, o.toString()])))}; ` +
        `group then: ${JSON.stringify(last)}; joins ${joinsBefore} before the step, ${joins(host.lines).length} at the end; ` +
        `exit ${JSON.stringify(exit)}`,
    );
    expect(last).toEqual(before);
    expect(joins(host.lines)).toHaveLength(joinsBefore);
    expect(runningAfter).toBe(true);
    expect(host.lines.filter((line) => line.message === 'pipeline failed')).toEqual([]);
    expect(exit.code).toBe(0);
  }, 240_000);
});
