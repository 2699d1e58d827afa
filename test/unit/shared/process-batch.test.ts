import { describe, expect, it } from 'vitest';
import { InvalidEventError, RetryBudgetExhaustedError } from '../../../shared/errors.js';
import type { Invocation } from '../../../shared/process-batch.js';
import type { PipelineRuntime } from '../../../shared/runtime.js';
import { processBatch } from '../../../shared/process-batch.js';
import { PIPELINES } from '../../../shared/pipelines.js';
import { PrecheckSwitch } from '../../../shared/upsert.js';
import { ApplicationResolver } from '../../../shared/resolver.js';
import { loadSettings } from '../../../shared/settings.js';
import type { RecordedQuery } from '../../helpers/fake-db.js';
import { connectionRefused, databaseError, FakePool, rejectionOf, statementOf } from '../../helpers/fake-db.js';
import { sampleReview } from '../../helpers/messages.js';
import type { TestRecord } from '../../helpers/lambda-events.js';
import { captureLogger, lambdaEvent } from '../../helpers/lambda-events.js';

const REGISTERED = { 'com.example.weather': '7' } as Record<string, string>;

/**
 * A database that answers like PostgreSQL for the reviews pipeline (registered apps resolve,
 * every written row is new), records every statement in `transcript` and fails a statement
 * when `failure` says so.
 */
function database(
  failure: (query: RecordedQuery, attempt: number) => Error | undefined = () => undefined,
  connectFailures: unknown[] = [],
) {
  const transcript: string[] = [];
  const pool: FakePool = new FakePool(
    (query) => {
      const statement = `${statementOf(query)}#${query.client}`;
      const error = failure(query, query.client);
      if (error) {
        transcript.push(`${statement} failed`);
        throw error;
      }
      transcript.push(statement);
      if (statementOf(query) === 'resolve') {
        const [names] = query.values as [string[]];
        return names.filter((name) => name in REGISTERED).map((name) => ({ id: REGISTERED[name], package_name: name }));
      }
      if (statementOf(query).startsWith('INSERT')) return ((query.values?.[0] ?? []) as unknown[]).map(() => ({ inserted: true }));
      return undefined;
    },
    { connectFailures },
  );
  return { pool, transcript };
}

function runtimeFor(pool: FakePool, env: Record<string, string> = {}) {
  const logger = captureLogger();
  const runtime: PipelineRuntime = {
    definition: PIPELINES.reviews,
    settings: loadSettings({ STORAGE_DB_RETRY_BASE_MS: '1', STORAGE_DB_RETRY_ATTEMPTS: '2', ...env }),
    logger,
    pool: async () => pool.asPool(),
    resolver: new ApplicationResolver(300_000),
    precheck: new PrecheckSwitch(),
  };
  return { runtime, logger };
}

function invocation(): Invocation & { waits: number } {
  const clock = { waits: 0 };
  return Object.assign(clock, { remainingMs: () => 60_000, onWait: () => void (clock.waits += 1) });
}

const review = (reviewId: string, partition: number, offset: number): TestRecord => ({
  partition,
  offset,
  value: { ...sampleReview(), review_id: reviewId },
});

/** Two good reviews and one record that is not JSON, on two partitions. */
const mixedBatch = () =>
  lambdaEvent('reviews', [review('gp:a', 0, 5), { partition: 0, offset: 6, value: '{"review_id": ' }, review('gp:b', 2, 1200)]);

/** Runs the batch and appends `reported` to the transcript when the handler would answer. */
async function runBatch(event: unknown, runtime: PipelineRuntime, transcript: string[], clock = invocation()) {
  const result = await processBatch(event, runtime, clock);
  transcript.push('reported');
  return result;
}

describe('processBatch: one transaction, then success', () => {
  it('runs BEGIN → dead letters → upsert → COMMIT, and only then reports success', async () => {
    // Prepare
    const { pool, transcript } = database();
    const { runtime, logger } = runtimeFor(pool);

    // Act
    const { response, report } = await runBatch(mixedBatch(), runtime, transcript);

    // Assess
    expect(transcript).toEqual([
      'BEGIN#1',
      'resolve#1',
      'INSERT INTO dead_letter_events#1',
      'INSERT INTO reviews#1',
      'COMMIT#1',
      'reported',
    ]);
    expect(response).toEqual({ batchItemFailures: [] });
    expect(report).toMatchObject({ records: 3, inserted: 2, updated: 0, skipped: 0, deadLettered: 1, attempts: 1, failed: false });
    expect(pool.clients.map((client) => client.releasedWith)).toEqual([null]);
    expect(pool.clients[0]?.listenerCount('error')).toBe(0);
    expect(logger.lines.filter((line) => line.level === 'info').map((line) => line.message)).toEqual(['batch stored']);
  });

  it.each([
    ['the dead letters', 'INSERT INTO dead_letter_events', databaseError('42P01', 'relation "dead_letter_events" does not exist')],
    ['the upsert', 'INSERT INTO reviews', databaseError('42501', 'permission denied for table reviews')],
    ['COMMIT', 'COMMIT', new TypeError('unexpected')],
  ])(
    'a failure of %s never commits, never reports success, and destroys the connection without a ROLLBACK',
    async (_label, failing, failure) => {
      // Prepare
      const { pool, transcript } = database((query) => (statementOf(query) === failing ? failure : undefined));
      const { runtime } = runtimeFor(pool);

      // Act
      const error = await rejectionOf(runBatch(mixedBatch(), runtime, transcript));

      // Assess
      expect(error).toBe(failure);
      expect(transcript).not.toContain('reported');
      expect(transcript).not.toContain('COMMIT#1');
      // The server rolls back what a destroyed connection left open; a ROLLBACK sent first would
      // cost one more query timeout on a connection that stopped answering.
      expect(transcript.at(-1)).toBe(`${failing}#1 failed`);
      expect(pool.clients.map((client) => client.releasedWith)).toEqual([failure]);
    },
  );

  it('answers a batch of only undecodable records with dead letters, and no upsert', async () => {
    // Prepare
    const { pool, transcript } = database();
    const { runtime } = runtimeFor(pool);
    const event = lambdaEvent('reviews', [
      { offset: 1, value: null },
      { offset: 2, value: Buffer.from([0xff]) },
    ]);

    // Act
    const { report } = await runBatch(event, runtime, transcript);

    // Assess
    expect(transcript).toEqual(['BEGIN#1', 'INSERT INTO dead_letter_events#1', 'COMMIT#1', 'reported']);
    expect(report).toMatchObject({ records: 2, inserted: 0, deadLettered: 2 });
  });
});

describe('processBatch: transient errors', () => {
  it('retries on a NEW connection and destroys the broken one', async () => {
    // Prepare: the first connection dies during the upsert (a ROLLBACK would fail as well)
    const lost = new Error('Connection terminated unexpectedly');
    const { pool, transcript } = database((query, client) =>
      client === 1 && (statementOf(query) === 'INSERT INTO reviews' || query.text === 'ROLLBACK') ? lost : undefined,
    );
    const { runtime, logger } = runtimeFor(pool);
    const clock = invocation();

    // Act
    const { response, report } = await runBatch(mixedBatch(), runtime, transcript, clock);

    // Assess
    expect(transcript).toEqual([
      'BEGIN#1',
      'resolve#1',
      'INSERT INTO dead_letter_events#1',
      'INSERT INTO reviews#1 failed',
      // no ROLLBACK on the broken connection: it is destroyed
      // the apps resolved on the first attempt are cached
      'BEGIN#2',
      'INSERT INTO dead_letter_events#2',
      'INSERT INTO reviews#2',
      'COMMIT#2',
      'reported',
    ]);
    expect(pool.clients.map((client) => client.releasedWith)).toEqual([lost, null]);
    expect(response).toEqual({ batchItemFailures: [] });
    expect(report).toMatchObject({ attempts: 2, inserted: 2, deadLettered: 1, failed: false });
    expect(clock.waits).toBe(1);
    expect(logger.lines.some((line) => line.level === 'warn' && line.extra.attempt === 1)).toBe(true);
  });

  it('retries when PostgreSQL cannot be reached at all', async () => {
    // Prepare
    const { pool, transcript } = database(() => undefined, [connectionRefused()]);
    const { runtime } = runtimeFor(pool);

    // Act
    const { report } = await runBatch(mixedBatch(), runtime, transcript);

    // Assess
    expect(report.attempts).toBe(2);
    expect(pool.clients).toHaveLength(1);
    expect(transcript.at(-2)).toBe('COMMIT#1');
  });

  it('survives a connection error event emitted while a query is running', async () => {
    // Prepare: pg emits 'error' on the client and rejects the query
    const lost = new Error('Connection terminated unexpectedly');
    const { pool, transcript } = database((query, client) => {
      if (client !== 1 || statementOf(query) !== 'INSERT INTO reviews') return undefined;
      pool.clients[0]?.emitConnectionError(lost);
      return lost;
    });
    const { runtime } = runtimeFor(pool);

    // Act
    const { report } = await runBatch(mixedBatch(), runtime, transcript);

    // Assess
    expect(report.attempts).toBe(2);
    expect(pool.clients[0]?.releasedWith).toBe(lost);
  });

  it('with failure response "throw" throws RetryBudgetExhaustedError once the budget is spent', async () => {
    // Prepare: every attempt loses its connection at COMMIT
    const lost = () => new Error('Connection terminated unexpectedly');
    const { pool, transcript } = database((query) => (query.text === 'COMMIT' ? lost() : undefined));
    const { runtime, logger } = runtimeFor(pool, { STORAGE_FAILURE_RESPONSE: 'throw' });

    // Act
    const error = await rejectionOf(runBatch(mixedBatch(), runtime, transcript));

    // Assess
    expect(error).toBeInstanceOf(RetryBudgetExhaustedError);
    expect((error as Error).cause).toBe(pool.clients[2]?.releasedWith);
    expect(pool.clients).toHaveLength(3); // first attempt + STORAGE_DB_RETRY_ATTEMPTS=2
    expect(pool.clients.every((client) => client.releasedWith instanceof Error)).toBe(true);
    expect(transcript).not.toContain('reported');
    expect(transcript.filter((statement) => statement.startsWith('COMMIT') && !statement.endsWith('failed'))).toEqual([]);
    expect(logger.lines.some((line) => line.level === 'error' && line.extra.failed === true)).toBe(true);
  });

  it('with failure response "report" names each partition’s LOWEST offset', async () => {
    // Prepare
    const { pool, transcript } = database(() => databaseError('57P01', 'terminating connection due to administrator command'));
    const { runtime } = runtimeFor(pool, { STORAGE_FAILURE_RESPONSE: 'report' });
    const event = lambdaEvent('reviews', [
      review('gp:a', 2, 1200),
      review('gp:b', 2, 1201),
      review('gp:c', 0, 5),
      review('gp:d', 0, 6),
      review('gp:e', 1, 9_007_199_254_740_991),
    ]);

    // Act
    const { response, report } = await runBatch(event, runtime, transcript);

    // Assess
    expect(response).toEqual({
      batchItemFailures: [
        { itemIdentifier: { partition: 'reviews-2', offset: 1200 } },
        { itemIdentifier: { partition: 'reviews-0', offset: 5 } },
        { itemIdentifier: { partition: 'reviews-1', offset: 9_007_199_254_740_991 } },
      ],
    });
    expect(report).toMatchObject({ failed: true, attempts: 3, inserted: 0, deadLettered: 0 });
    expect(transcript.some((statement) => statement.startsWith('COMMIT') && !statement.endsWith('failed'))).toBe(false);
  });

  it('re-reads rotated credentials once after 28P01 and retries on the new pool', async () => {
    // Prepare: the old password is refused; refreshing ends the old pool and opens a new one
    const stale = database(() => undefined, [databaseError('28P01', 'password authentication failed for user "storage"')]);
    const fresh = database();
    let current = stale.pool;
    const { runtime: base } = runtimeFor(stale.pool);
    const runtime: PipelineRuntime = {
      ...base,
      pool: async () => current.asPool(),
      refreshCredentials: async () => {
        await current.end();
        current = fresh.pool;
      },
    };

    // Act
    const { report } = await runBatch(mixedBatch(), runtime, fresh.transcript);

    // Assess
    expect(report).toMatchObject({ attempts: 2, failed: false, inserted: 2 });
    expect(stale.pool.clients).toHaveLength(0);
    expect(fresh.transcript.at(-2)).toBe('COMMIT#1');
  });
});

describe('processBatch: fatal and refused', () => {
  it('throws a fatal error as it is, without retrying', async () => {
    // Prepare
    const missing = databaseError('42P01', 'relation "reviews" does not exist');
    const { pool, transcript } = database((query) => (statementOf(query) === 'INSERT INTO reviews' ? missing : undefined));
    const { runtime } = runtimeFor(pool);

    // Act
    const error = await rejectionOf(runBatch(mixedBatch(), runtime, transcript));

    // Assess
    expect(error).toBe(missing);
    expect(pool.clients).toHaveLength(1);
    // Destroyed (the server rolls back): a client whose invocation ended in an error never
    // serves the next batch.
    expect(pool.clients[0]?.releasedWith).toBe(missing);
    expect(transcript.at(-1)).toBe('INSERT INTO reviews#1 failed');
  });

  it('refuses a malformed event before touching the database', async () => {
    // Prepare
    const { pool, transcript } = database();
    const { runtime } = runtimeFor(pool);

    // Act
    const error = await rejectionOf(runBatch({ eventSource: 'aws:sqs', records: {} }, runtime, transcript));

    // Assess
    expect(error).toBeInstanceOf(InvalidEventError);
    expect(pool.clients).toHaveLength(0);
  });

  it('isolates a row the database refuses (23514), dead-letters it and commits the rest', async () => {
    // Prepare: a CHECK constraint refuses review gp:b, which the decoder accepted
    const refusesB = (query: RecordedQuery) =>
      statementOf(query) === 'INSERT INTO reviews' && ((query.values?.[0] ?? []) as string[]).includes('gp:b')
        ? databaseError('23514', 'new row for relation "reviews" violates check constraint "reviews_score_check"')
        : undefined;
    const { pool, transcript } = database(refusesB);
    const { runtime, logger } = runtimeFor(pool);
    const deadLetterRows = () =>
      pool.log
        .filter((query) => statementOf(query) === 'INSERT INTO dead_letter_events')
        .map((query) => ({ offsets: query.values?.[3], reasons: query.values?.[10], details: query.values?.[11] }));

    // Act
    const { response, report } = await runBatch(
      lambdaEvent('reviews', [review('gp:a', 0, 5), review('gp:b', 0, 6), review('gp:c', 0, 7)]),
      runtime,
      transcript,
    );

    // Assess
    expect(response).toEqual({ batchItemFailures: [] });
    expect(report).toMatchObject({ inserted: 2, deadLettered: 1, attempts: 1 });
    // The plain batch is refused and rolled back; the isolating rerun, on the same connection,
    // is a new transaction with savepoints.
    expect(transcript.filter((statement) => /^(BEGIN|COMMIT|ROLLBACK|INSERT INTO reviews)#/.test(statement))).toEqual([
      'BEGIN#1',
      'INSERT INTO reviews#1 failed', // a, b, c
      'ROLLBACK#1',
      'BEGIN#1',
      'INSERT INTO reviews#1 failed', // a, b, c
      'INSERT INTO reviews#1 failed', // a, b
      'INSERT INTO reviews#1', // a
      'INSERT INTO reviews#1 failed', // b
      'INSERT INTO reviews#1', // c
      'COMMIT#1',
    ]);
    expect(deadLetterRows()).toEqual([
      { offsets: ['6'], reasons: ['rejected_by_database'], details: [expect.stringMatching(/^SQLSTATE 23514: .*reviews_score_check/)] },
    ]);
    // The refused row's exact place is logged, for `peek` before a step-over.
    expect(logger.lines.find((line) => line.message === 'rows refused by the database')?.extra).toMatchObject({
      pipeline: 'reviews',
      count: 1,
      rows: [{ partition: 0, offset: 6, detail: expect.stringMatching(/^SQLSTATE 23514/) }],
    });
  });
});

describe('processBatch: the stale-row pre-check', () => {
  it('filters stale rows before the insert only after a batch whose rows the table declined', async () => {
    // Prepare: the database declines every row of the first batch (a replay), stores the others
    const inserts: string[] = [];
    let declining = true;
    const pool = new FakePool((query) => {
      if (statementOf(query) === 'resolve') return [{ id: '7', package_name: 'com.example.weather' }];
      if (statementOf(query) !== 'INSERT INTO reviews') return undefined;
      inserts.push(query.text.includes('SELECT stored.last_synced_at FROM reviews') ? 'with pre-check' : 'without');
      const rows = ((query.values?.[0] ?? []) as unknown[]).map(() => ({ inserted: true }));
      return declining ? [] : rows;
    });
    const { runtime } = runtimeFor(pool);
    const batch = (offset: number) =>
      lambdaEvent('reviews', [review(`gp:${offset}`, 0, offset), review(`gp:${offset + 1}`, 0, offset + 1)]);

    // Act
    const replayed = await processBatch(batch(1), runtime, invocation());
    declining = false;
    const afterReplay = await processBatch(batch(3), runtime, invocation());
    const fresh = await processBatch(batch(5), runtime, invocation());

    // Assess: the guard decides every time; the pre-check only follows the last outcome
    expect(inserts).toEqual(['without', 'with pre-check', 'without']);
    expect([replayed, afterReplay, fresh].map(({ report }) => [report.inserted, report.skipped])).toEqual([
      [0, 2],
      [2, 0],
      [2, 0],
    ]);
  });
});
