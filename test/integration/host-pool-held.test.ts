/**
 * A batch blocked on a table lock holds the pipeline's pool (issue 29): `/readyz` says the
 * database answers but the pool is held, naming the batch and what its statement waits on, not
 * "database does not answer"; the batch's in-process retries (statement timeouts) show in the
 * status endpoint and in the `pipeline stalled` line with their count and last error. On the
 * real broker and PostgreSQL, the host as operators run it (a child process with its endpoint).
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePorts } from '../../dev/free-ports.js';
import type { PipelineStatusDocument } from '../../host-api/status-document.js';
import { createMigratedSchema } from '../helpers/database.js';
import type { TestSchema } from '../helpers/database.js';
import {
  createTestPipelines,
  hostEnvironment,
  jsonMessages,
  killAllHosts,
  spawnHost,
  temporaryDirectory,
  waitForCommittedToEnd,
  waitUntil,
} from '../helpers/host.js';
import { produce, testKafka } from '../helpers/kafka.js';
import { sampleReview } from '../helpers/messages.js';

let schema: TestSchema;
const cleanups: Array<() => Promise<void>> = [];

beforeAll(async () => {
  schema = await createMigratedSchema([{ id: 1, package_name: 'com.example.weather' }], 'hostpoolheld');
});

afterAll(async () => {
  await killAllHosts();
  for (const cleanup of cleanups) await cleanup();
  await schema?.drop();
});

describe('a pool held by a blocked batch', () => {
  it('readiness names the held pool, the batch and its wait; the status and the stall line carry the retries and the last error', async () => {
    // Prepare: a pool of one connection, a short statement timeout, so the blocked batch retries in-process
    const names = await createTestPipelines('pool-held');
    const [port] = await freePorts(1);
    const heartbeats = await temporaryDirectory('pool-held-');
    cleanups.push(heartbeats.remove);
    const host = spawnHost(
      hostEnvironment({
        databaseUrl: schema.url,
        names,
        heartbeatDir: heartbeats.path,
        extra: {
          STORAGE_HTTP_PORT: String(port),
          STORAGE_HTTP_HOST: '127.0.0.1',
          STORAGE_DB_POOL_MAX: '1',
          STORAGE_DB_STATEMENT_TIMEOUT_MS: '2500',
          STORAGE_DB_RETRY_ATTEMPTS: '20',
          STORAGE_STALL_AFTER_MS: '3000',
          STORAGE_PIPELINES: 'reviews',
        },
      }),
    );
    const get = async (path: string) => {
      const response = await fetch(`http://127.0.0.1:${port}${path}`, { signal: AbortSignal.timeout(10_000) });
      return { status: response.status, text: await response.text() };
    };
    await waitUntil('/readyz answers 200', async () => (await get('/readyz').catch(() => ({ status: 0 }))).status === 200, 120_000, 250);
    const locker = await schema.pool.connect();
    let locked = false;
    try {
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE reviews IN ACCESS EXCLUSIVE MODE');
      locked = true;
      const [{ pid: lockerPid } = { pid: 0 }] = (await locker.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows;

      // Act
      const records = await produce(
        names.topics.reviews,
        jsonMessages(
          Array.from({ length: 5 }, () => ({ ...sampleReview(), review_id: `held:${randomUUID()}` })),
          { partition: 0 },
        ),
      );
      const firstOffset = records[0]?.baseOffset ?? '0';

      // Assess: readiness says the pool is held by that batch, and what the statement waits on
      let held = '';
      await waitUntil(
        '/readyz to name the held pool',
        async () => {
          const answer = await get('/readyz');
          const body = JSON.parse(answer.text) as { missing: string[] };
          held = body.missing.find((cause) => cause.includes('connection(s) of the pipeline')) ?? '';
          return answer.status === 503 && held.includes('blocked by pid');
        },
        60_000,
        250,
      );
      expect(held).toMatch(
        new RegExp(
          `^reviews: database answers, but all 1 connection\\(s\\) of the pipeline's pool are held by the batch in flight: ` +
            `${names.topics.reviews} partition 0 offsets ${firstOffset}\\.\\.\\d+, attempt 1.*; a statement running for \\d+ s waits on ` +
            `Lock/relation, blocked by pid ${lockerPid}$`,
        ),
      );
      expect(held).not.toContain('database does not answer');

      // The status: the retries and the statement timeout they hit
      let inFlight: NonNullable<PipelineStatusDocument['partitions'][number]['in_flight']> | undefined;
      await waitUntil(
        'the status to count two retries',
        async () => {
          const status = JSON.parse((await get('/pipelines/reviews/status')).text) as PipelineStatusDocument;
          inFlight = status.partitions.find((partition) => partition.partition === 0)?.in_flight ?? undefined;
          return (inFlight?.retries ?? 0) >= 2;
        },
        60_000,
        250,
      );
      expect(inFlight).toMatchObject({ first_offset: firstOffset, attempt: 1 });
      expect(inFlight?.last_error?.message).toContain('canceling statement due to statement timeout');

      // The stall line: the same retries and error
      const stalled = await host.waitForLog(
        (line) => line.message === 'pipeline stalled' && typeof line.retries === 'number' && line.retries >= 2,
        60_000,
      );
      expect(stalled).toMatchObject({ level: 'WARN', partition: 0, first_offset: firstOffset, attempt: 1 });
      expect(String(stalled.lastError)).toContain('canceling statement due to statement timeout');
      expect(String((stalled.causes as string[])[0])).toMatch(/attempt 1 \(\d+ database retries\)/);
      console.log(`[host-pool-held] /readyz: ${held}`);
      console.log(`[host-pool-held] stalled: ${JSON.stringify(stalled)}`);

      // Act: the lock goes away
      await locker.query('ROLLBACK');
      locked = false;
    } finally {
      if (locked) await locker.query('ROLLBACK').catch(() => undefined);
      locker.release();
    }

    // Assess: stored, ready again
    const admin = testKafka('pool-held-test').admin();
    await admin.connect();
    try {
      await waitForCommittedToEnd(admin, names.groups.reviews, names.topics.reviews);
    } finally {
      await admin.disconnect();
    }
    await waitUntil('/readyz answers 200 again', async () => (await get('/readyz')).status === 200, 30_000, 250);
  }, 240_000);
});
