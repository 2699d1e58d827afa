/**
 * Joining is a state with its own rule (issue 38): a host started while the coordinator holds its
 * first JoinGroup (the group's other member rejoins only once its batch, waiting on a row lock
 * well inside its deadline, is written) does not fail however much longer than its fetch bounds
 * that join takes; it gets its partitions once the lock goes, everything is stored, and both
 * hosts stop with exit 0. Real broker, real PostgreSQL, both hosts as operators run them (child
 * processes), with short fetch bounds: unready 2 s, fail 5 s; the join's own bound is the
 * rebalance timeout (STORAGE_MAX_POLL_INTERVAL_MS + 10 s, and kafkajs' 5 s: 75 s).
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePorts } from '../../dev/free-ports.js';
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
  waitUntil,
} from '../helpers/host.js';
import { produce } from '../helpers/kafka.js';
import { sampleReview } from '../helpers/messages.js';

const FAIL_AFTER_MS = 5_000;

let stack: HostTestStack;

beforeAll(async () => {
  stack = await openHostTestStack('first-join');
});

afterAll(async () => {
  await killAllHosts();
  await closeHostTestStack(stack, []);
});

const joined = (line: HostLogLine) => line.message === 'joined the consumer group';
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function stopHost(host: HostProcess): Promise<number | null> {
  host.child.kill('SIGTERM');
  return (await host.exited).code;
}

describe('a host whose first join the coordinator holds', () => {
  it('does not fail while it waits for its first join past its fail bound; it gets its partitions once the lock goes, and stores', async () => {
    // Prepare: host A of reviews, joined; a test client holds a lock its next batch needs
    const names = await createTestPipelines('first-join');
    const topic = names.topics.reviews;
    const env = hostEnvironment({
      databaseUrl: stack.schema.url,
      names,
      heartbeatDir: stack.heartbeats.path,
      extra: {
        STORAGE_PIPELINES: 'reviews',
        STORAGE_FETCH_UNREADY_AFTER_MS: '2000',
        STORAGE_FETCH_FAIL_AFTER_MS: String(FAIL_AFTER_MS),
        STORAGE_MAX_POLL_INTERVAL_MS: '60000',
        STORAGE_DB_STATEMENT_TIMEOUT_MS: '45000',
      },
    });
    const first = spawnHost(env);
    await first.waitForLog(joined, 90_000);
    const locker = await stack.schema.pool.connect();
    let released = false;
    let second: HostProcess | undefined;
    try {
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE reviews IN ACCESS EXCLUSIVE MODE');
      const reviews = Array.from({ length: 30 }, (_, index) => ({ ...sampleReview(), review_id: `first-join:${index}:${randomUUID()}` }));
      await produce(topic, jsonMessages(reviews));
      await waitUntil(
        "host A's batch waiting on the lock",
        async () => {
          const { rows } = await stack.schema.pool.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'storage-consumer/reviews' AND wait_event_type = 'Lock'`,
          );
          return (rows[0]?.n ?? 0) > 0;
        },
        30_000,
        100,
      );
      const lockedAt = performance.now();

      // Act: host B starts meanwhile, in the same group; its first join waits for A's rejoin,
      // which waits for the batch on the lock. The lock holds for three of B's fail bounds and more.
      const [port] = await freePorts(1);
      second = spawnHost({ ...env, STORAGE_HTTP_PORT: String(port), STORAGE_HTTP_HOST: '127.0.0.1' });
      const joinBegun = await second.waitForLog((line) => line.message === 'joining the consumer group', 60_000);
      const joinBegunAt = performance.now();
      // A timer may fire a fraction of a millisecond before performance.now() says its delay passed
      // (CI saw 14999.86 ms for a 15000 ms sleep): stay on the monotonic clock until it is past.
      for (let left = 3 * FAIL_AFTER_MS; left >= 0; left = 3 * FAIL_AFTER_MS - (performance.now() - joinBegunAt)) {
        await sleep(Math.ceil(left) + 1);
      }
      const heldMs = performance.now() - joinBegunAt;
      // What B says of itself meanwhile: not ready, joining, for longer than its fail bound.
      const readyz = await fetch(`http://127.0.0.1:${port}/readyz`, { signal: AbortSignal.timeout(10_000) });
      const readiness = (await readyz.json()) as { missing: string[] };
      const secondAliveDuringLock = second.child.exitCode === null && second.child.signalCode === null;
      const secondJoinedDuringLock = second.lines.some(joined);
      const secondFailure = second.lines.find((line) => line.message === 'pipeline failed');
      await locker.query('ROLLBACK');
      released = true;
      const lockHeldMs = performance.now() - lockedAt;

      // Assess: B joins with partitions once the lock went, everything is stored
      const secondJoin = await second.waitForLog(
        (line) => joined(line) && ((line.assignment as Record<string, number[]> | undefined)?.[topic]?.length ?? 0) > 0,
        90_000,
      );
      const later = Array.from({ length: 30 }, (_, index) => ({
        ...sampleReview(),
        review_id: `first-join:later:${index}:${randomUUID()}`,
      }));
      await produce(topic, jsonMessages(later));
      await waitForCommittedToEnd(stack.admin, names.groups.reviews, topic, 90_000);
      const { rows } = await stack.schema.pool.query<{ n: number; distinct_ids: number }>(
        `SELECT count(*)::int AS n, count(DISTINCT review_id)::int AS distinct_ids FROM reviews WHERE review_id LIKE 'first-join:%'`,
      );
      const committed = Object.fromEntries(
        [...(await committedOffsets(stack.admin, names.groups.reviews, topic))].map(([p, o]) => [p, String(o)]),
      );
      console.log(
        `[first-join] B's first join held ${Math.round(heldMs)} ms past its start line (fail bound ${FAIL_AFTER_MS} ms), lock held ` +
          `${Math.round(lockHeldMs)} ms; B alive: ${secondAliveDuringLock}, joined during the lock: ${secondJoinedDuringLock}; ` +
          `B's start line: ${JSON.stringify(joinBegun)}; B's join: ${JSON.stringify(secondJoin)}; rows ${rows[0]?.n} ` +
          `(${rows[0]?.distinct_ids} distinct) of ${reviews.length + later.length}; committed ${JSON.stringify(committed)}`,
      );
      console.log(`[first-join] B's /readyz during its join: ${readyz.status} ${JSON.stringify(readiness)}`);
      expect(secondFailure).toBeUndefined();
      expect(secondAliveDuringLock).toBe(true);
      expect(secondJoinedDuringLock).toBe(false);
      expect(readyz.status).toBe(503);
      const joining = readiness.missing.find((cause) => cause.startsWith('reviews: joining its consumer group'));
      expect(joining, readiness.missing.join('; ')).toMatch(
        new RegExp(`^reviews: joining its consumer group ${names.groups.reviews.replaceAll('.', '\\.')} for (\\d+) s \\(the first join;`),
      );
      expect(Number(/for (\d+) s/.exec(joining as string)?.[1])).toBeGreaterThan(FAIL_AFTER_MS / 1000);
      expect(rows[0]).toEqual({ n: reviews.length + later.length, distinct_ids: reviews.length + later.length });
      expect(first.lines.find((line) => line.message === 'pipeline failed')).toBeUndefined();
      expect(second.lines.find((line) => line.message === 'pipeline failed')).toBeUndefined();
    } finally {
      if (!released) await locker.query('ROLLBACK').catch(() => undefined);
      locker.release();
    }
    expect(await stopHost(second)).toBe(0);
    expect(await stopHost(first)).toBe(0);
  }, 300_000);
});
