import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ConfigurationError } from '../../shared/errors.js';
import { processBatch } from '../../shared/process-batch.js';
import type { BatchOptions } from '../../shared/process-batch.js';
import type { PipelineName } from '../../shared/pipelines.js';
import { createPipelineRuntime } from '../../shared/runtime.js';
import type { TestSchema } from '../helpers/database.js';
import { createMigratedSchema, SERVER_URL, withSearchPath } from '../helpers/database.js';
import { sampleAppStats, sampleNetworkMetrics, sampleReview } from '../helpers/messages.js';
import type { RunningPgBouncer } from '../helpers/pgbouncer.js';
import { PGBOUNCER_MISSING, pgbouncerBinary, startPgBouncer } from '../helpers/pgbouncer.js';
import type { TestRecord } from '../helpers/lambda-events.js';
import { captureLogger, lambdaEvent, testSettings } from '../helpers/lambda-events.js';

const WEATHER = { id: 401, package_name: 'com.example.weather' };
const POOLED_DATABASE = 'storage_pooled';

/**
 * PgBouncer is optional outside CI: without it (and with `CI` unset) this file's tests are
 * reported as skipped, with one line naming the package. With `CI` set, its absence fails them.
 */
const CI = (process.env.CI ?? '') !== '' && process.env.CI !== 'false';
const skipped = pgbouncerBinary() === undefined && !CI;
if (skipped) console.log(`[pgbouncer] ${PGBOUNCER_MISSING}`);

let schema: TestSchema;
let bouncer: RunningPgBouncer;
/** A direct connection, to act on the server behind PgBouncer's back. */
let admin: pg.Client;
const runtimes: Array<{ close(): Promise<void> }> = [];

beforeAll(async () => {
  if (skipped) return;
  schema = await createMigratedSchema([WEATHER], 'pgbouncer');
  // Clients may not send `options` through PgBouncer 1.18, so the test schema's search_path
  // is set by PgBouncer on each server connection it opens.
  bouncer = await startPgBouncer(SERVER_URL, { [POOLED_DATABASE]: { connectQuery: `SET search_path TO ${schema.schema}` } });
  admin = new pg.Client({ connectionString: SERVER_URL });
  await admin.connect();
}, 60_000);

afterEach(async () => {
  await Promise.all(runtimes.splice(0).map((runtime) => runtime.close()));
});

afterAll(async () => {
  await admin?.end();
  await bouncer?.stop();
  await schema?.drop();
});

/** The URL clients use: PgBouncer's port and its database name, no libpq options. */
function pooledUrl(): string {
  const url = new URL(SERVER_URL);
  url.hostname = '127.0.0.1';
  url.port = String(bouncer.port);
  url.pathname = `/${POOLED_DATABASE}`;
  url.search = '';
  return url.toString();
}

function pipeline(name: PipelineName, env: Record<string, string> = {}, url = pooledUrl()) {
  const logger = captureLogger();
  const runtime = createPipelineRuntime(name, testSettings(url, env), logger);
  runtimes.push(runtime);
  const run = (records: readonly TestRecord[], options: BatchOptions = {}) =>
    processBatch(lambdaEvent(name, records), runtime, { remainingMs: () => 60_000 }, options);
  return { logger, run };
}

async function rows<T extends pg.QueryResultRow>(sql: string, values: unknown[] = []): Promise<T[]> {
  return (await schema.pool.query<T>(sql, values)).rows;
}

/** Ends every server connection this PgBouncer holds (as a failover would), found on its admin console. */
async function killServerConnections(): Promise<number> {
  const url = new URL(pooledUrl());
  url.pathname = '/pgbouncer';
  const console = new pg.Client({ connectionString: url.toString() });
  await console.connect();
  let pids: number[];
  try {
    pids = (await console.query<{ remote_pid: string }>('SHOW SERVERS')).rows.map((row) => Number(row.remote_pid));
  } finally {
    await console.end();
  }
  for (const pid of pids) await admin.query('SELECT pg_terminate_backend($1)', [pid]);
  // Termination is asynchronous: wait until the backends are gone, and give PgBouncer a moment
  // to see their sockets close (else it could lend one that is still dying).
  const until = Date.now() + 5_000;
  while (Date.now() < until) {
    const alive = await admin.query('SELECT 1 FROM pg_stat_activity WHERE pid = ANY($1::int[])', [pids]);
    if (alive.rowCount === 0) break;
    await sleep(20);
  }
  await sleep(200);
  return pids.length;
}

const review = (id: string, offset: number, overrides: Record<string, unknown> = {}): TestRecord => ({
  offset,
  value: { ...sampleReview(), review_id: id, ...overrides },
});

describe.skipIf(skipped)('through PgBouncer 1.18 in transaction mode, stock settings', () => {
  it('stores rows of every pipeline', async () => {
    // Act
    const reviews = await pipeline('reviews').run([review('pgb:r1', 0), review('pgb:r2', 1)]);
    const stats = await pipeline('app-stats').run([
      { offset: 0, value: { ...sampleAppStats(), crawled_at: '2026-11-30T01:02:03.123456' } },
    ]);
    const metrics = await pipeline('network-metrics').run([
      { offset: 0, value: { ...sampleNetworkMetrics(), analysis_id: '4f0e8a5c-0b7d-4c1e-9a3f-5d6b7c8d9e01' } },
    ]);

    // Assess
    expect(reviews.report).toMatchObject({ inserted: 2, failed: false });
    expect(stats.report).toMatchObject({ inserted: 1, failed: false });
    expect(metrics.report).toMatchObject({ inserted: 1, failed: false });
    const [stored] = await rows<{ crawled_at: string }>(
      `SELECT to_char(crawled_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US') AS crawled_at FROM app_stats WHERE application_id = $1`,
      [WEATHER.id],
    );
    expect(stored?.crawled_at).toBe('2026-11-30T01:02:03.123456');
  });

  it('writes dead letters with the good rows of the batch', async () => {
    // Act
    const { report } = await pipeline('reviews').run([
      review('pgb:d1', 10),
      { offset: 11, value: '{"review_id": ' },
      review('pgb:d2', 12, { package_name: 'com.example.unknown' }),
    ]);

    // Assess
    expect(report).toMatchObject({ inserted: 1, deadLettered: 2, failed: false });
    const letters = await rows<{ kafka_offset: string; reason: string }>(
      `SELECT kafka_offset, reason FROM dead_letter_events WHERE topic = 'reviews' AND kafka_offset IN (11, 12) ORDER BY kafka_offset`,
    );
    expect(letters).toEqual([
      { kafka_offset: '11', reason: 'invalid_json' },
      { kafka_offset: '12', reason: 'unknown_application' },
    ]);
  });

  it('a redelivered batch duplicates nothing (rows and dead letters)', async () => {
    // Prepare
    const { run } = pipeline('reviews');
    const batch = [review('pgb:x1', 20), { offset: 21, value: 'not json' }];

    // Act
    const first = await run(batch);
    const again = await run(batch);

    // Assess
    expect(first.report).toMatchObject({ inserted: 1, deadLettered: 1 });
    expect(again.report).toMatchObject({ inserted: 0, skipped: 1, failed: false });
    const [counts] = await rows<{ reviews: string; letters: string }>(
      `SELECT (SELECT count(*) FROM reviews WHERE review_id = 'pgb:x1') AS reviews,
              (SELECT count(*) FROM dead_letter_events WHERE topic = 'reviews' AND kafka_offset = 21) AS letters`,
    );
    expect(counts).toEqual({ reviews: '1', letters: '1' });
  });

  it('isolates a row the database refuses (rejected_by_database) and stores its neighbours', async () => {
    // Prepare
    await schema.pool.query(`ALTER TABLE reviews ADD CONSTRAINT reviews_pgb_forbidden CHECK (content IS DISTINCT FROM 'pgb-forbidden')`);
    try {
      // Act
      const { report } = await pipeline('reviews').run([
        review('pgb:ok-1', 30),
        review('pgb:bad', 31, { content: 'pgb-forbidden' }),
        review('pgb:ok-2', 32),
      ]);

      // Assess
      expect(report).toMatchObject({ inserted: 2, deadLettered: 1, failed: false });
      const [letter] = await rows<{ reason: string; detail: string }>(
        `SELECT reason, detail FROM dead_letter_events WHERE topic = 'reviews' AND kafka_offset = 31`,
      );
      expect(letter?.reason).toBe('rejected_by_database');
      expect(letter?.detail).toContain('23514');
    } finally {
      await schema.pool.query('ALTER TABLE reviews DROP CONSTRAINT reviews_pgb_forbidden');
    }
  });

  it('retries a batch whose server connection was killed mid-transaction, on a fresh one', async () => {
    // Prepare: the first attempt's server backend is terminated just before COMMIT
    const { run, logger } = pipeline('reviews');
    let attempt = 0;
    const killFirst: BatchOptions['beforeCommit'] = async (client) => {
      attempt += 1;
      if (attempt > 1) return;
      const [backend] = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows;
      await admin.query('SELECT pg_terminate_backend($1)', [backend?.pid]);
    };

    // Act
    const { report } = await run([review('pgb:k1', 40)], { beforeCommit: killFirst });

    // Assess
    expect(report).toMatchObject({ attempts: 2, inserted: 1, failed: false });
    expect(logger.lines.some((line) => line.message.startsWith('transient database error'))).toBe(true);
    expect(await rows(`SELECT 1 FROM reviews WHERE review_id = 'pgb:k1'`)).toHaveLength(1);
  });

  it('bounds a statement by the statement timeout and runs in UTC, both set inside the transaction', async () => {
    // Prepare: the first attempt runs a statement longer than the statement timeout
    const { run, logger } = pipeline('reviews', { STORAGE_DB_STATEMENT_TIMEOUT_MS: '300' });
    const seen: string[] = [];
    const slowFirst: BatchOptions['beforeCommit'] = async (client) => {
      seen.push(String((await client.query<{ TimeZone: string }>('SHOW TimeZone')).rows[0]?.TimeZone));
      if (seen.length === 1) await client.query('SELECT pg_sleep(1)');
    };

    // Act
    const { report } = await run([review('pgb:t1', 50)], { beforeCommit: slowFirst });

    // Assess
    expect(report).toMatchObject({ attempts: 2, inserted: 1, failed: false });
    expect(seen).toEqual(['UTC', 'UTC']);
    const retry = logger.lines.find((line) => line.message.startsWith('transient database error'));
    expect(String(retry?.extra.error)).toContain('statement timeout');
  });
});

describe.skipIf(skipped)('through PgBouncer: what a transaction pooler refuses is a configuration error', () => {
  it('named prepared statements (STORAGE_DB_PREPARED_STATEMENTS=true) fail fatally, naming the setting, never retried', async () => {
    // Prepare: a statement prepared on one server connection, which the pooler then replaces
    const { run } = pipeline('reviews', { STORAGE_DB_PREPARED_STATEMENTS: 'true' });
    await run([review('pgb:p1', 60)]);
    expect(await killServerConnections()).toBeGreaterThan(0);

    // Act
    const outcome = run([review('pgb:p2', 61)]);

    // Assess
    const error = await outcome.then(
      () => undefined,
      (failure: unknown) => failure,
    );
    expect(error).toBeInstanceOf(ConfigurationError);
    expect((error as Error).message).toContain('STORAGE_DB_PREPARED_STATEMENTS=false');
    expect(await rows(`SELECT 1 FROM reviews WHERE review_id = 'pgb:p2'`)).toHaveLength(0);
  });

  it('a startup parameter (libpq options in DATABASE_URL) fails fatally with a clear message, never retried', async () => {
    // Prepare
    const { run, logger } = pipeline('reviews', {}, withSearchPath(pooledUrl(), schema.schema));

    // Act
    const started = Date.now();
    const error = await run([review('pgb:o1', 70)]).then(
      () => undefined,
      (failure: unknown) => failure,
    );

    // Assess
    expect(error).toBeInstanceOf(ConfigurationError);
    expect((error as Error).message).toMatch(/unsupported startup parameter: options/);
    expect((error as Error).message).toContain('DATABASE_URL');
    expect(logger.lines.filter((line) => line.message.startsWith('transient database error'))).toEqual([]);
    expect(Date.now() - started).toBeLessThan(2_000);
  });
});
