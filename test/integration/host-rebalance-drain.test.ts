/**
 * The host writes a partition's batches while kafkajs fetches on (host/partition-lanes.ts), so a
 * rebalance must wait for the writes in flight (kafka/kafkajs/group-gate.ts): a second member
 * joining while the first one's batch is blocked on a table lock gets its partitions only once
 * that batch is stored and committed; nothing is lost or stored twice. Real broker, real
 * PostgreSQL, both hosts as operators run them (child processes).
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { HostProcess, HostTestStack } from '../helpers/host.js';
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

let stack: HostTestStack;

beforeAll(async () => {
  stack = await openHostTestStack('rebalance-drain');
});

afterAll(async () => {
  await killAllHosts();
  await closeHostTestStack(stack, []);
});

const joined = (line: { message?: string }) => line.message === 'joined the consumer group';

async function stopHost(host: HostProcess): Promise<number | null> {
  host.child.kill('SIGTERM');
  return (await host.exited).code;
}

describe('a rebalance while a batch is being written', () => {
  it('lets the member that writes finish and commit before the group rejoins: the newcomer gets partitions only after that', async () => {
    // Prepare: one host of reviews, joined and idle
    const names = await createTestPipelines('rebalance-drain');
    const env = hostEnvironment({
      databaseUrl: stack.schema.url,
      names,
      heartbeatDir: stack.heartbeats.path,
      extra: { STORAGE_PIPELINES: 'reviews', STORAGE_DB_STATEMENT_TIMEOUT_MS: '60000' },
    });
    const first = spawnHost(env);
    await first.waitForLog(joined, 90_000);
    const locker = await stack.schema.pool.connect();
    let released = 0;
    let second: HostProcess | undefined;
    try {
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE reviews IN ACCESS EXCLUSIVE MODE');

      // Act: records on every partition; the first host's batches block on the lock
      const reviews = Array.from({ length: 60 }, (_, index) => ({ ...sampleReview(), review_id: `drain:${index}:${randomUUID()}` }));
      await produce(names.topics.reviews, jsonMessages(reviews));
      await waitUntil(
        "the first host's statements waiting on the lock",
        async () => {
          const { rows } = await stack.schema.pool.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'storage-consumer/reviews' AND wait_event_type = 'Lock'`,
          );
          return (rows[0]?.n ?? 0) > 0;
        },
        30_000,
        100,
      );
      // A second member joins the group meanwhile, and the lock holds for 5 s more.
      second = spawnHost(env);
      const secondStarted = performance.now();
      await new Promise((resolve) => setTimeout(resolve, 5_000));
      const secondJoinedDuringLock = second.lines.some(joined);
      const firstRejoinsDuringLock = first.lines.filter(joined).length;
      await locker.query('ROLLBACK');
      released = performance.now();
      const secondJoin = await second.waitForLog(joined, 60_000);
      const secondJoinedAfterMs = performance.now() - released;
      await waitForCommittedToEnd(stack.admin, names.groups.reviews, names.topics.reviews, 60_000);

      // Assess
      const { rows } = await stack.schema.pool.query<{ n: number; distinct_ids: number }>(
        `SELECT count(*)::int AS n, count(DISTINCT review_id)::int AS distinct_ids FROM reviews WHERE review_id LIKE 'drain:%'`,
      );
      const commitFailures = first.lines.filter((line) => line.message?.startsWith('offset commit failed'));
      console.log(
        `[rebalance-drain] second host spawned while the first one's batch waited on the lock; ` +
          `joined during the 5 s of lock: ${secondJoinedDuringLock}; its join ${Math.round(secondJoinedAfterMs)} ms after the release ` +
          `(${Math.round(performance.now() - secondStarted)} ms after its spawn): ${JSON.stringify(secondJoin.assignment ?? secondJoin)}; ` +
          `first host's joins: ${first.lines.filter(joined).length}; commit failures on the first host: ${commitFailures.length}; ` +
          `rows ${rows[0]?.n} (${rows[0]?.distinct_ids} distinct) of ${reviews.length}; committed ${JSON.stringify(
            Object.fromEntries(await committedOffsets(stack.admin, names.groups.reviews, names.topics.reviews)),
            (_key, value: unknown) => (typeof value === 'bigint' ? value.toString() : value),
          )}`,
      );
      expect(secondJoinedDuringLock).toBe(false);
      expect(firstRejoinsDuringLock).toBe(1);
      expect(first.lines.filter(joined).length).toBeGreaterThanOrEqual(2);
      expect(rows[0]).toEqual({ n: reviews.length, distinct_ids: reviews.length });
      expect(first.lines.find((line) => line.message === 'pipeline failed')).toBeUndefined();
    } finally {
      if (released === 0) await locker.query('ROLLBACK').catch(() => undefined);
      locker.release();
    }
    expect(await stopHost(first)).toBe(0);
    if (second) expect(await stopHost(second)).toBe(0);
  }, 240_000);
});
