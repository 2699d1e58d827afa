import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { attemptTimeNeededMs } from '../../shared/connection.js';
import { processBatch } from '../../shared/process-batch.js';
import { createPipelineRuntime } from '../../shared/runtime.js';
import { createInProcessInvoker } from '../../host/invoker.js';
import type { TestSchema } from '../helpers/database.js';
import { createMigratedSchema, SERVER_URL } from '../helpers/database.js';
import { sampleReview } from '../helpers/messages.js';
import { captureLogger, lambdaEvent, testSettings } from '../helpers/lambda-events.js';
import type { TcpProxy } from '../helpers/tcp-proxy.js';
import { startTcpProxy, throughProxy } from '../helpers/tcp-proxy.js';
import { deadlineIn } from '../../host/clock.js';

const WEATHER = { id: 301, package_name: 'com.example.weather' };
// Short timeouts so a hang is found in seconds: the client gives up 1 s after the statement
// timeout, an attempt may need 1 + 2 + 1 = 4 s.
const TIMEOUTS = {
  STORAGE_DB_POOL_MAX: '1',
  STORAGE_DB_STATEMENT_TIMEOUT_MS: '1000',
  STORAGE_DB_CONNECT_TIMEOUT_MS: '1000',
  STORAGE_DB_RETRY_BASE_MS: '50',
  STORAGE_FAILURE_RESPONSE: 'report',
};

let schema: TestSchema;
let proxy: TcpProxy;
const closers: Array<() => Promise<void>> = [];

beforeAll(async () => {
  schema = await createMigratedSchema([WEATHER], 'hung');
  const server = new URL(SERVER_URL);
  proxy = await startTcpProxy({ host: server.hostname, port: Number(server.port || 5432) });
});

afterEach(async () => {
  proxy.blackholeNew(false);
  await Promise.all(closers.splice(0).map((close) => close()));
});

afterAll(async () => {
  await proxy?.close();
  await schema?.drop();
});

const reviews = (prefix: string, offset: number) =>
  lambdaEvent(
    'reviews',
    [0, 1, 2].map((index) => ({ offset: offset + index, value: { ...sampleReview(), review_id: `${prefix}-${index}` } })),
  );

async function storedReviews(prefix: string): Promise<number> {
  const result = await schema.pool.query<{ count: string }>('SELECT count(*) FROM reviews WHERE review_id LIKE $1', [`${prefix}-%`]);
  return Number(result.rows[0]?.count);
}

function pipelineThroughProxy(env: Record<string, string> = {}) {
  const logger = captureLogger();
  const runtime = createPipelineRuntime('reviews', testSettings(throughProxy(schema.url, proxy), { ...TIMEOUTS, ...env }), logger);
  closers.push(runtime.close);
  return { runtime, logger };
}

describe('a connection whose packets are silently dropped', () => {
  it('does not wedge the pool (max 1): an invocation abandoned mid-hang, and the next one stores its batch', async () => {
    // Prepare: a warm pool with its one connection, then the network drops that connection
    const { runtime, logger } = pipelineThroughProxy();
    await processBatch(reviews('warm', 0), runtime, { remainingMs: () => 60_000 });
    const droppedBefore = proxy.droppedFromClients().length;
    proxy.blackholeExisting();

    // Act: the invocation that meets the hang is abandoned (as Lambda abandons one at its
    // timeout); the next one starts at once, in the same process, on the same pool
    const abandoned = processBatch(reviews('abandoned', 10), runtime, { remainingMs: () => 60_000 });
    const started = Date.now();
    const next = await processBatch(reviews('next', 20), runtime, { remainingMs: () => 60_000 });
    const nextMs = Date.now() - started;
    const first = await abandoned;

    // Assess: both stored, each batch once; the hung client was destroyed, never reused
    expect(next.response).toEqual({ batchItemFailures: [] });
    expect(next.report).toMatchObject({ inserted: 3, failed: false });
    expect(first.report).toMatchObject({ inserted: 3, failed: false });
    expect(await storedReviews('next')).toBe(3);
    expect(await storedReviews('abandoned')).toBe(3);
    // The hung query fails on the client-side timeout (statement timeout + 1 s), not after minutes.
    expect(nextMs).toBeLessThan(15_000);
    const retries = logger.lines.filter((line) => line.message.startsWith('transient database error'));
    expect(retries.some((line) => String(line.extra.error).includes('Query read timeout'))).toBe(true);
    // One query timeout per attempt: the timed-out client is destroyed, no ROLLBACK is sent on it
    // (it would hang a second timeout on the dead connection first).
    const sentIntoTheHang = proxy.droppedFromClients().subarray(droppedBefore);
    expect(sentIntoTheHang.includes(Buffer.from('BEGIN'))).toBe(true);
    expect(sentIntoTheHang.includes(Buffer.from('ROLLBACK'))).toBe(false);
  });

  it('hands a batch back when the hang eats the invocation, and the next invocation stores it', async () => {
    // Prepare: warm connection, then the network drops it
    const { runtime } = pipelineThroughProxy();
    await processBatch(reviews('warm2', 30), runtime, { remainingMs: () => 60_000 });
    proxy.blackholeExisting();
    const needed = attemptTimeNeededMs(runtime.settings.database);

    // Act: just enough time for one attempt, not for a second one
    let deadline = Date.now() + needed + 500;
    const handedBack = await processBatch(reviews('late', 40), runtime, { remainingMs: () => deadline - Date.now() });
    const handedBackAt = Date.now();
    deadline = Date.now() + 60_000;
    const redelivered = await processBatch(reviews('late', 40), runtime, { remainingMs: () => deadline - Date.now() });

    // Assess
    expect(handedBack.response).toEqual({ batchItemFailures: [{ itemIdentifier: { partition: 'reviews-0', offset: 40 } }] });
    expect(handedBack.report).toMatchObject({ failed: true, attempts: 1 });
    expect(handedBackAt).toBeLessThanOrEqual(deadline);
    expect(redelivered.report).toMatchObject({ failed: false, inserted: 3, attempts: 1 });
    expect(await storedReviews('late')).toBe(3);
  });

  it('on the host, a database that hangs is a transient failure (redelivered), never a fatal one', async () => {
    // Prepare: every connection, old and new, goes silent
    const settings = testSettings(throughProxy(schema.url, proxy), { ...TIMEOUTS, STORAGE_FAILURE_RESPONSE: 'throw' });
    const invoker = createInProcessInvoker('reviews', settings);
    closers.push(() => invoker.close());
    await invoker.invoke(reviews('warm-host', 50), deadlineIn(60_000));
    proxy.blackholeExisting();
    proxy.blackholeNew(true);

    // Act
    const started = Date.now();
    const hung = await invoker.invoke(reviews('host', 60), deadlineIn(10_000));
    const hungMs = Date.now() - started;
    proxy.blackholeNew(false);
    const healed = await invoker.invoke(reviews('host', 60), deadlineIn(60_000));

    // Assess
    expect(hung).toMatchObject({ kind: 'error', fatal: false });
    expect((hung as { error: Error }).error.name).toBe('RetryBudgetExhaustedError');
    expect(hungMs).toBeLessThan(10_000);
    expect(healed).toEqual({ kind: 'response', payload: { batchItemFailures: [] } });
    expect(await storedReviews('host')).toBe(3);
  });
});

describe('a COMMIT whose acknowledgement is lost', () => {
  it('counts a new poison record as dead-lettered (not already_dead_lettered) when the retry meets its own letter; a replay counts it as already stored', async () => {
    // Prepare: a good review and a poison record; the first attempt's COMMIT is applied by the
    // server, and the connection is cut before its answer reaches the client
    const { runtime, logger } = pipelineThroughProxy();
    const batch = () =>
      lambdaEvent('reviews', [
        { offset: 500, value: { ...sampleReview(), review_id: 'commit-lost-1' } },
        { offset: 501, value: '{"review_id": "commit-lost-poison", ' },
      ]);
    const cut = proxy.cutAfterNextCommit();

    // Act
    const first = await processBatch(batch(), runtime, { remainingMs: () => 60_000 });
    await cut;
    const replayed = await processBatch(batch(), runtime, { remainingMs: () => 60_000 });

    // Assess: two attempts; the letter stored by the first (lost ack) counts as new
    expect(first.report).toMatchObject({ attempts: 2, failed: false, deadLettered: 1, alreadyDeadLettered: 0, skipped: 1 });
    const letters = await schema.pool.query<{ reason: string; invocation_id: string | null }>(
      "SELECT reason, invocation_id FROM dead_letter_events WHERE kafka_offset = 501 AND topic = 'reviews'",
    );
    expect(letters.rows).toHaveLength(1);
    expect(letters.rows[0]?.invocation_id).toMatch(/^[0-9a-f-]{36}$/);
    // A replay of the same records: already stored, one INFO line with the count, no WARN
    expect(replayed.report).toMatchObject({ attempts: 1, deadLettered: 0, alreadyDeadLettered: 1 });
    const warned = logger.lines.filter((line) => line.message === 'message dead-lettered');
    expect(warned).toHaveLength(1);
    expect(warned[0]?.extra).toMatchObject({ offset: 501, reason: 'invalid_json' });
    expect(logger.lines.filter((line) => line.message === 'dead letters already stored').map((line) => line.extra)).toEqual([
      { pipeline: 'reviews', count: 1, byReason: { invalid_json: 1 } },
    ]);
  });
});

describe('the retry budget with a short function timeout', () => {
  it('starts no attempt that cannot finish: the batch is handed back at once', async () => {
    // Prepare: the function has less time left than connect + statement timeouts
    const { runtime } = pipelineThroughProxy();
    const needed = attemptTimeNeededMs(runtime.settings.database);
    const acceptedBefore = proxy.accepted();

    // Act
    const started = Date.now();
    const { response, report } = await processBatch(reviews('short', 70), runtime, { remainingMs: () => needed - 1 });
    const tookMs = Date.now() - started;

    // Assess: no connection opened, nothing stored, each partition's lowest offset reported
    expect(response).toEqual({ batchItemFailures: [{ itemIdentifier: { partition: 'reviews-0', offset: 70 } }] });
    expect(report).toMatchObject({ failed: true, attempts: 0 });
    expect(tookMs).toBeLessThan(500);
    expect(proxy.accepted()).toBe(acceptedBefore);
    expect(await storedReviews('short')).toBe(0);
  });

  it('in the throw form, throws RetryBudgetExhaustedError at once instead of being killed mid-attempt', async () => {
    // Prepare
    const { runtime } = pipelineThroughProxy({ STORAGE_FAILURE_RESPONSE: 'throw' });
    const needed = attemptTimeNeededMs(runtime.settings.database);

    // Act
    const outcome = processBatch(reviews('short-throw', 80), runtime, { remainingMs: () => needed - 1 });

    // Assess
    await expect(outcome).rejects.toMatchObject({ name: 'RetryBudgetExhaustedError' });
    expect(await storedReviews('short-throw')).toBe(0);
  });
});
