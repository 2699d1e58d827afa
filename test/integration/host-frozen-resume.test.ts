/**
 * The host's own stalls are not the consumer's (issue 38): a host frozen (SIGSTOP, as a suspended
 * VM or `docker pause` would) for three of its fail bounds on a healthy broker, then resumed
 * (SIGCONT), does not fail itself for the time it did not run: it stays up for a further fail
 * bound and more, says once how long it did not run, counts the stall in /metrics, and stores what
 * is produced next; SIGTERM then stops it with exit 0. While frozen the broker drops the member
 * (its session is 6 s): it rejoins after the resume, as any dropped member does. Real broker, real
 * PostgreSQL, the host as operators run it (a child process with its HTTP endpoint). That a host
 * that cannot fetch after its resume still fails at the bound is held on a hand clock by
 * test/unit/host/progress-watch.test.ts.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePorts } from '../../dev/free-ports.js';
import { PROCESS_STALL_METRIC_NAMES } from '../../host/metrics.js';
import type { HostLogLine, HostProcess, HostTestStack } from '../helpers/host.js';
import {
  closeHostTestStack,
  committedOffsets,
  createTestPipelines,
  hostEnvironment,
  jsonMessages,
  killAllHosts,
  openHostTestStack,
  spawnHost,
  waitForCommittedToEnd,
} from '../helpers/host.js';
import { produce } from '../helpers/kafka.js';
import { sampleReview } from '../helpers/messages.js';

const FAIL_AFTER_MS = 5_000;
const FROZEN_MS = 16_000;

let stack: HostTestStack;

beforeAll(async () => {
  stack = await openHostTestStack('frozen-resume');
});

afterAll(async () => {
  await killAllHosts();
  await closeHostTestStack(stack, []);
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const stallLine = (line: HostLogLine) => line.message?.startsWith('the host itself did not run for') === true;

async function storedReviews(prefix: string): Promise<number> {
  const { rows } = await stack.schema.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM reviews WHERE review_id LIKE $1`, [
    `${prefix}%`,
  ]);
  return rows[0]?.n ?? 0;
}

describe('a host that was itself not running', () => {
  it('stays up after a freeze of three fail bounds, says so once, counts it, and stores what is produced next', async () => {
    // Prepare: a host of reviews with short bounds, storing
    const names = await createTestPipelines('frozen-resume');
    const topic = names.topics.reviews;
    const [port] = await freePorts(1);
    const host: HostProcess = spawnHost(
      hostEnvironment({
        databaseUrl: stack.schema.url,
        names,
        heartbeatDir: stack.heartbeats.path,
        extra: {
          STORAGE_PIPELINES: 'reviews',
          STORAGE_FETCH_UNREADY_AFTER_MS: '2000',
          STORAGE_FETCH_FAIL_AFTER_MS: String(FAIL_AFTER_MS),
          STORAGE_HTTP_PORT: String(port),
          STORAGE_HTTP_HOST: '127.0.0.1',
        },
      }),
    );
    const scrape = async (name: string) => {
      const response = await fetch(`http://127.0.0.1:${port}/metrics`, { signal: AbortSignal.timeout(10_000) });
      const line = (await response.text()).split('\n').find((candidate) => candidate.startsWith(`${name} `));
      return line === undefined ? undefined : Number(line.slice(name.length + 1));
    };
    await host.waitForLog((line) => line.message === 'joined the consumer group', 90_000);
    const before = Array.from({ length: 20 }, (_, index) => ({ ...sampleReview(), review_id: `frozen:before:${index}:${randomUUID()}` }));
    await produce(topic, jsonMessages(before));
    await waitForCommittedToEnd(stack.admin, names.groups.reviews, topic, 60_000);
    expect(await scrape(PROCESS_STALL_METRIC_NAMES.stalls)).toBe(0);
    expect(await scrape(PROCESS_STALL_METRIC_NAMES.stalledSeconds)).toBe(0);

    // Act: the process does not run for three fail bounds and more, then runs again
    const pid = host.child.pid as number;
    process.kill(pid, 'SIGSTOP');
    await sleep(FROZEN_MS);
    process.kill(pid, 'SIGCONT');
    const resumedAt = performance.now();

    // Assess: no exit within a further fail bound and more; the stall said once, and counted
    const stall = await host.waitForLog(stallLine, 10_000);
    await sleep(2 * FAIL_AFTER_MS);
    const upAfterMs = performance.now() - resumedAt;
    const alive = host.child.exitCode === null && host.child.signalCode === null;
    const stalls = await scrape(PROCESS_STALL_METRIC_NAMES.stalls);
    const stalledSeconds = await scrape(PROCESS_STALL_METRIC_NAMES.stalledSeconds);
    // What is produced after the resume is stored.
    const after = Array.from({ length: 20 }, (_, index) => ({ ...sampleReview(), review_id: `frozen:after:${index}:${randomUUID()}` }));
    await produce(topic, jsonMessages(after));
    await waitForCommittedToEnd(stack.admin, names.groups.reviews, topic, 60_000);
    const storedAfter = await storedReviews('frozen:after:');
    const committed = Object.fromEntries(
      [...(await committedOffsets(stack.admin, names.groups.reviews, topic))].map(([partition, offset]) => [partition, String(offset)]),
    );
    const notable = host.lines.filter(
      (line) =>
        stallLine(line) ||
        line.message === 'pipeline failed' ||
        line.message === 'pipeline not fetching' ||
        line.message === 'joining the consumer group' ||
        line.message === 'joined the consumer group',
    );
    console.log(
      `[frozen-resume] frozen ${FROZEN_MS} ms (fail bound ${FAIL_AFTER_MS} ms); alive ${Math.round(upAfterMs)} ms after the resume: ${alive}; ` +
        `${PROCESS_STALL_METRIC_NAMES.stalls} ${stalls}, ${PROCESS_STALL_METRIC_NAMES.stalledSeconds} ${stalledSeconds}; ` +
        `stored after the resume ${storedAfter} of ${after.length}; committed ${JSON.stringify(committed)}\n` +
        notable.map((line) => JSON.stringify(line)).join('\n'),
    );
    expect(alive).toBe(true);
    expect(host.lines.find((line) => line.message === 'pipeline failed')).toBeUndefined();
    expect(host.lines.filter(stallLine)).toHaveLength(1);
    const seconds = Number(/did not run for (\d+) s/.exec(stall.message as string)?.[1]);
    expect(seconds).toBeGreaterThanOrEqual(FROZEN_MS / 1000 - 1);
    expect(seconds).toBeLessThanOrEqual(FROZEN_MS / 1000 + 3);
    expect(stall.stalledMs).toEqual(expect.any(Number));
    expect(stalls).toBe(1);
    expect(stalledSeconds).toBeGreaterThanOrEqual(FROZEN_MS / 1000 - 1);
    expect(storedAfter).toBe(after.length);
    expect(await storedReviews('frozen:before:')).toBe(before.length);

    host.child.kill('SIGTERM');
    expect((await host.exited).code).toBe(0);
  }, 180_000);
});
