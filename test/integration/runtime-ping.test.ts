/**
 * The readiness ping on a real PostgreSQL: a pool whose every connection is checked out for a
 * moment (a batch writing) is busy, not held; a pool whose connections stay busy past the ping's
 * wait (a statement blocked on a lock) is held, and the ping names what its sessions wait on.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPipelineRuntime } from '../../shared/runtime.js';
import type { TestSchema } from '../helpers/database.js';
import { createMigratedSchema } from '../helpers/database.js';
import { captureLogger, testSettings } from '../helpers/lambda-events.js';

let schema: TestSchema;

beforeAll(async () => {
  schema = await createMigratedSchema([], 'runtimeping');
});

afterAll(async () => {
  await schema?.drop();
});

describe('the readiness ping', () => {
  it('waits for a connection of a full pool that frees within its wait, and answers ok', async () => {
    const runtime = createPipelineRuntime('reviews', testSettings(schema.url, { STORAGE_DB_POOL_MAX: '2' }), captureLogger());
    try {
      const pool = await runtime.pool();
      // Every connection busy for 300 ms, as a batch's statements keep them.
      const busy = [pool.query('SELECT pg_sleep(0.3)'), pool.query('SELECT pg_sleep(0.3)')];
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(pool.idleCount).toBe(0);
      expect(pool.totalCount).toBe(2);
      const started = performance.now();
      const result = await runtime.ping();
      const waitedMs = performance.now() - started;
      await Promise.all(busy);
      expect(result).toEqual({ poolHeld: undefined });
      expect(waitedMs).toBeGreaterThan(150);
      expect(pool.totalCount).toBe(2);
      expect(pool.waitingCount).toBe(0);
    } finally {
      await runtime.close();
    }
  });

  it("says the pool is held, and on what its own session waits (not another host's of the same pipeline), past the wait", async () => {
    const runtime = createPipelineRuntime('reviews', testSettings(schema.url, { STORAGE_DB_POOL_MAX: '1' }), captureLogger());
    // Another host of reviews on the same server: same application name, blocked on the same lock.
    const other = createPipelineRuntime('reviews', testSettings(schema.url, { STORAGE_DB_POOL_MAX: '1' }), captureLogger());
    const locker = await schema.pool.connect();
    try {
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE reviews IN ACCESS EXCLUSIVE MODE');
      const [{ pid } = { pid: 0 }] = (await locker.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows;
      const pool = await runtime.pool();
      const blocked = pool.query('SELECT count(*) FROM reviews');
      const otherBlocked = (await other.pool()).query('SELECT count(*) FROM reviews');
      await new Promise((resolve) => setTimeout(resolve, 100));
      const result = await runtime.ping();
      // Probes while it stays held queue no further request for a connection.
      const again = await runtime.ping();
      expect(pool.waitingCount).toBe(1);
      expect(again.poolHeld).toMatchObject({ size: 1 });
      expect(result.poolHeld).toMatchObject({ size: 1, waiting: 0 });
      expect(result.poolHeld?.waits).toEqual([expect.stringMatching(new RegExp(`waits on Lock/relation, blocked by pid ${pid}$`))]);
      await locker.query('ROLLBACK');
      await Promise.all([blocked, otherBlocked]);
      // The ping's queued request got the connection once the statement ended and gave it back.
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(pool.waitingCount).toBe(0);
      expect(pool.idleCount).toBe(1);
      expect(await runtime.ping()).toEqual({ poolHeld: undefined });
    } finally {
      await locker.query('ROLLBACK').catch(() => undefined);
      locker.release();
      await runtime.close();
      await other.close();
    }
  });
});
