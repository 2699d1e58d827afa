import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { processBatch } from '../../shared/process-batch.js';
import type { PipelineName } from '../../shared/pipelines.js';
import { createPipelineRuntime } from '../../shared/runtime.js';
import { RetryBudgetExhaustedError } from '../../shared/errors.js';
import type { TestSchema } from '../helpers/database.js';
import { createMigratedSchema } from '../helpers/database.js';
import type { TestRecord } from '../helpers/lambda-events.js';
import { captureLogger, lambdaEvent, testSettings } from '../helpers/lambda-events.js';
import { sampleAppStats, sampleNetworkMetrics, sampleReview } from '../helpers/messages.js';

const WEATHER = { id: 101, package_name: 'com.example.weather' };
const CHAT = { id: 102, package_name: 'com.example.chat', is_active: false };

function review(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { ...sampleReview(), review_id: 'gp:review-1', ...overrides };
}

function appStats(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { ...sampleAppStats(), ...overrides };
}

function networkMetrics(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { ...sampleNetworkMetrics(), ...overrides };
}

let schema: TestSchema;
const runtimes: Array<{ close(): Promise<void> }> = [];

beforeAll(async () => {
  schema = await createMigratedSchema([WEATHER, CHAT], 'pipeline');
});

afterEach(async () => {
  await Promise.all(runtimes.splice(0).map((runtime) => runtime.close()));
});

afterAll(async () => {
  await schema?.drop();
});

function pipeline(name: PipelineName, env: Record<string, string> = {}, url = schema.url) {
  const logger = captureLogger();
  const runtime = createPipelineRuntime(name, testSettings(url, env), logger);
  runtimes.push(runtime);
  const run = (topic: string, records: readonly TestRecord[], remainingMs = 60_000) =>
    processBatch(lambdaEvent(topic, records), runtime, { remainingMs: () => remainingMs });
  return { runtime, logger, run };
}

async function rows<T extends pg.QueryResultRow>(sql: string, values: unknown[] = []): Promise<T[]> {
  return (await schema.pool.query<T>(sql, values)).rows;
}

describe('write outcomes per table', () => {
  it('counts inserted, updated and skipped rows for reviews, with the monotonic guard', async () => {
    // Prepare
    const { run } = pipeline('reviews');
    const id = 'gp:outcomes';
    // Act
    const first = await run('reviews', [{ offset: 0, value: review({ review_id: id, last_synced_at: '2026-11-30T06:00:00Z' }) }]);
    const newer = await run('reviews', [
      { offset: 1, value: review({ review_id: id, thumbs_up_count: 20, last_synced_at: '2026-11-30T07:00:00Z' }) },
    ]);
    const older = await run('reviews', [
      { offset: 2, value: review({ review_id: id, thumbs_up_count: 1, last_synced_at: '2026-11-30T06:30:00Z' }) },
    ]);
    const equal = await run('reviews', [
      { offset: 3, value: review({ review_id: id, thumbs_up_count: 2, last_synced_at: '2026-11-30T07:00:00Z' }) },
    ]);
    // Assess
    expect(first.report).toMatchObject({ inserted: 1, updated: 0, skipped: 0 });
    expect(newer.report).toMatchObject({ inserted: 0, updated: 1, skipped: 0 });
    expect(older.report).toMatchObject({ inserted: 0, updated: 0, skipped: 1 });
    expect(equal.report).toMatchObject({ inserted: 0, updated: 0, skipped: 1 });
    const [stored] = await rows('SELECT thumbs_up_count, source_offset FROM reviews WHERE review_id = $1', [id]);
    expect(stored).toEqual({ thumbs_up_count: 20, source_offset: '1' });
    expect(first.response).toEqual({ batchItemFailures: [] });
  });

  it('inserts app-stats once and skips the redelivery', async () => {
    const { run } = pipeline('app-stats');
    const records = [{ offset: 10, value: appStats({ crawled_at: '2026-11-30T05:00:00Z' }) }];
    const first = await run('app-stats', records);
    const again = await run('app-stats', records);
    expect(first.report).toMatchObject({ inserted: 1, skipped: 0 });
    expect(again.report).toMatchObject({ inserted: 0, updated: 0, skipped: 1 });
    const stored = await rows(
      `SELECT application_id, histogram, price::text AS price, currency, app_version, source_partition, source_offset
         FROM app_stats WHERE crawled_at = '2026-11-30T05:00:00Z'`,
    );
    expect(stored).toEqual([
      {
        application_id: '101',
        histogram: ['9120', '3011', '7420', '30110', '133073'],
        price: '0.00',
        currency: 'USD',
        app_version: '7.4.1',
        source_partition: 0,
        source_offset: '10',
      },
    ]);
  });

  it('inserts network-metrics once and skips the redelivery', async () => {
    const { run } = pipeline('network-metrics');
    const records = [{ offset: 5, value: networkMetrics({ analysis_id: '00000000-0000-4000-8000-000000000001' }) }];
    const first = await run('network-metrics', records);
    const again = await run('network-metrics', records);
    expect(first.report).toMatchObject({ inserted: 1, skipped: 0 });
    expect(again.report).toMatchObject({ inserted: 0, skipped: 1 });
    const [stored] = await rows<{ protocols: unknown; bytes_received: string }>(
      `SELECT protocols, bytes_received FROM network_metrics WHERE analysis_id = '00000000-0000-4000-8000-000000000001'`,
    );
    expect(stored).toEqual({ protocols: { tls: 7010, dns: 82, quic: 1320 }, bytes_received: '5120987' });
  });

  it('stores data of a soft-deleted (inactive) app', async () => {
    const { run } = pipeline('reviews');
    const result = await run('reviews', [{ offset: 0, value: review({ review_id: 'gp:inactive', package_name: CHAT.package_name }) }]);
    expect(result.report).toMatchObject({ inserted: 1, deadLettered: 0 });
  });
});

describe('columns updates never touch', () => {
  it('keeps first_seen_at and sentiment through an update, and moves the lineage', async () => {
    const { run } = pipeline('reviews');
    const id = 'gp:first-seen';
    await run('reviews', [{ partition: 1, offset: 40, value: review({ review_id: id, last_synced_at: '2026-11-30T06:00:00Z' }) }]);
    await schema.pool.query(`UPDATE reviews SET first_seen_at = '2020-01-01T00:00:00Z', sentiment = 0.25 WHERE review_id = $1`, [id]);
    const updated = await run('reviews', [
      { partition: 2, offset: 41, value: review({ review_id: id, content: 'changed', last_synced_at: '2026-11-30T08:00:00Z' }) },
    ]);
    expect(updated.report.updated).toBe(1);
    const [stored] = await rows(
      `SELECT first_seen_at = '2020-01-01T00:00:00Z' AS first_seen_kept, sentiment, content, source_partition, source_offset
         FROM reviews WHERE review_id = $1`,
      [id],
    );
    expect(stored).toEqual({ first_seen_kept: true, sentiment: 0.25, content: 'changed', source_partition: 2, source_offset: '41' });
  });
});

describe('poison records', () => {
  it('dead-letters a poison record between good ones, stores the neighbours and reports success', async () => {
    const { run, logger } = pipeline('reviews');
    const result = await run('reviews', [
      { offset: 100, value: review({ review_id: 'gp:before' }) },
      { offset: 101, value: Buffer.from([0xff, 0xfe, 0x7b]), key: 'poison', headers: [{ name: 'trace', value: 'abc' }] },
      { offset: 102, value: '{"review_id": ' },
      { offset: 103, value: review({ review_id: 'gp:bad-score', score: 6 }) },
      { offset: 104, value: null },
      { offset: 105, value: review({ review_id: 'gp:unknown', package_name: 'com.example.missing' }) },
      { offset: 106, value: review({ review_id: 'gp:after' }) },
    ]);
    expect(result.response).toEqual({ batchItemFailures: [] });
    expect(result.report).toMatchObject({ records: 7, inserted: 2, deadLettered: 5 });
    const stored = await rows(`SELECT review_id FROM reviews WHERE review_id IN ('gp:before', 'gp:after') ORDER BY review_id`);
    expect(stored).toHaveLength(2);
    const letters = await rows<{
      kafka_offset: string;
      reason: string;
      payload_size: number;
      headers: unknown;
      message_key: Buffer | null;
    }>(
      `SELECT kafka_offset, reason, payload_size, headers, message_key FROM dead_letter_events
        WHERE topic = 'reviews' AND kafka_offset BETWEEN 100 AND 106 ORDER BY kafka_offset`,
    );
    expect(letters.map((letter) => [letter.kafka_offset, letter.reason])).toEqual([
      ['101', 'invalid_encoding'],
      ['102', 'invalid_json'],
      ['103', 'invalid_message'],
      ['104', 'empty_message'],
      ['105', 'unknown_application'],
    ]);
    expect(letters[0]?.headers).toEqual([{ name: 'trace', value: Buffer.from('abc').toString('base64') }]);
    expect(letters[0]?.message_key).toEqual(Buffer.from('poison'));
    expect(letters[0]?.payload_size).toBe(3);
    // Log volume: 5 detailed lines at most, and one INFO line with every counter.
    const info = logger.lines.filter((line) => line.level === 'info' && line.message === 'batch stored');
    expect(info).toHaveLength(1);
    expect(info[0]?.extra).toMatchObject({
      pipeline: 'reviews',
      records: 7,
      inserted: 2,
      updated: 0,
      skipped: 0,
      deduplicated: 0,
      dead_lettered: 5,
      already_dead_lettered: 0,
      partitions: [{ partition: 'reviews-0', first: 100, last: 106 }],
    });
    expect(info[0]?.extra.duration_ms).toEqual(expect.any(Number));
  });

  it('does not multiply dead letters when the same batch is redelivered', async () => {
    const { run } = pipeline('reviews');
    const records = [{ partition: 2, offset: 900, value: 'not json' }];
    const first = await run('reviews', records);
    const replayed = await run('reviews', records);
    // Only the first delivery stores a letter: the replay counts apart and does not fire the alarm.
    expect(first.report).toMatchObject({ records: 1, deadLettered: 1, alreadyDeadLettered: 0 });
    expect(replayed.report).toMatchObject({ records: 1, deadLettered: 0, alreadyDeadLettered: 1 });
    const [count] = await rows<{ n: string }>(
      `SELECT count(*) AS n FROM dead_letter_events WHERE topic = 'reviews' AND partition = 2 AND kafka_offset = 900`,
    );
    expect(count?.n).toBe('1');
  });

  it('truncates a poison payload above 64 KiB and says so, but keeps an unknown-app message whole', async () => {
    const { run } = pipeline('reviews');
    const huge = Buffer.alloc(70_000, 0x61); // not JSON
    const waiting = review({ review_id: 'gp:whole', package_name: 'com.example.later', content: 'x'.repeat(70_000) });
    await run('reviews', [
      { partition: 1, offset: 700, value: huge },
      { partition: 1, offset: 701, value: waiting },
    ]);
    const letters = await rows<{ reason: string; size: number; stored: number; detail: string }>(
      `SELECT reason, payload_size AS size, length(payload) AS stored, detail FROM dead_letter_events
        WHERE topic = 'reviews' AND partition = 1 AND kafka_offset IN (700, 701) ORDER BY kafka_offset`,
    );
    expect(letters[0]).toMatchObject({ reason: 'invalid_json', size: 70_000, stored: 65_536 });
    expect(letters[0]?.detail).toContain('truncated to 65536 of 70000 bytes');
    expect(letters[1]).toMatchObject({ reason: 'unknown_application' });
    expect(letters[1]?.stored).toBe(letters[1]?.size);
  });
});

describe('one transaction', () => {
  it('rolls back the dead letters when the upsert after them fails fatally (nothing half-written)', async () => {
    const { run } = pipeline('network-metrics');
    await schema.pool.query(`
      CREATE FUNCTION fail_on_marker() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW.analyzer_version = 'explode' THEN RAISE EXCEPTION 'injected failure' USING ERRCODE = 'P0001'; END IF;
        RETURN NEW;
      END $$;
      CREATE TRIGGER fail_on_marker BEFORE INSERT ON network_metrics FOR EACH ROW EXECUTE FUNCTION fail_on_marker();`);
    try {
      await expect(
        run('network-metrics', [
          { offset: 300, value: 'poison' },
          { offset: 301, value: networkMetrics({ analysis_id: '00000000-0000-4000-8000-000000000301', analyzer_version: 'explode' }) },
        ]),
      ).rejects.toThrow('injected failure');
      const [letters] = await rows<{ n: string }>(
        `SELECT count(*) AS n FROM dead_letter_events WHERE topic = 'network-metrics' AND kafka_offset = 300`,
      );
      const [data] = await rows<{ n: string }>(
        `SELECT count(*) AS n FROM network_metrics WHERE analysis_id = '00000000-0000-4000-8000-000000000301'`,
      );
      expect(letters?.n).toBe('0');
      expect(data?.n).toBe('0');
    } finally {
      await schema.pool.query('DROP TRIGGER fail_on_marker ON network_metrics; DROP FUNCTION fail_on_marker()');
    }
  });
});

describe('in-batch duplicates', () => {
  it('keeps the newest review version across partitions, and the first one on a tie', async () => {
    const { run } = pipeline('reviews');
    const result = await run('reviews', [
      { partition: 0, offset: 500, value: review({ review_id: 'gp:dup', thumbs_up_count: 1, last_synced_at: '2026-11-30T06:00:00Z' }) },
      { partition: 1, offset: 500, value: review({ review_id: 'gp:dup', thumbs_up_count: 3, last_synced_at: '2026-11-30T08:00:00Z' }) },
      { partition: 2, offset: 500, value: review({ review_id: 'gp:dup', thumbs_up_count: 2, last_synced_at: '2026-11-30T07:00:00Z' }) },
      { partition: 0, offset: 501, value: review({ review_id: 'gp:tie', thumbs_up_count: 10, last_synced_at: '2026-11-30T06:00:00Z' }) },
      {
        partition: 1,
        offset: 501,
        value: review({ review_id: 'gp:tie', thumbs_up_count: 11, last_synced_at: '2026-11-30T06:00:00.000000+00:00' }),
      },
    ]);
    expect(result.report).toMatchObject({ records: 5, inserted: 2, deduplicated: 3 });
    const stored = await rows(
      `SELECT review_id, thumbs_up_count, source_partition FROM reviews WHERE review_id IN ('gp:dup', 'gp:tie') ORDER BY review_id`,
    );
    expect(stored).toEqual([
      { review_id: 'gp:dup', thumbs_up_count: 3, source_partition: 1 },
      { review_id: 'gp:tie', thumbs_up_count: 10, source_partition: 0 },
    ]);
  });

  it('keeps the first app-stats row of one app and crawl instant, even when the offsets differ in form', async () => {
    const { run } = pipeline('app-stats');
    const result = await run('app-stats', [
      { partition: 0, offset: 600, value: appStats({ crawled_at: '2026-11-30T10:00:00+03:30', score: 1 }) },
      { partition: 1, offset: 600, value: appStats({ crawled_at: '2026-11-30T06:30:00Z', score: 2 }) },
    ]);
    expect(result.report).toMatchObject({ inserted: 1, deduplicated: 1 });
    const stored = await rows(`SELECT score FROM app_stats WHERE crawled_at = '2026-11-30T06:30:00Z'`);
    expect(stored).toEqual([{ score: 1 }]);
  });
});

describe('timestamps', () => {
  it('stores a microsecond timestamp exactly, with the process and the database session in other time zones', async () => {
    const previousTz = process.env.TZ;
    process.env.TZ = 'Asia/Tehran';
    try {
      const url = new URL(schema.url);
      url.searchParams.set('options', `${url.searchParams.get('options') ?? ''} -c TimeZone=America/St_Johns`);
      const { run } = pipeline('app-stats', {}, url.toString());
      await run('app-stats', [
        { offset: 800, value: appStats({ crawled_at: '2026-11-30T06:00:00.123456', app_updated_at: '2026-01-01T02:00:00.000001+03:30' }) },
      ]);
      const reader = new pg.Client({ connectionString: schema.url });
      await reader.connect();
      try {
        await reader.query(`SET TIME ZONE 'Pacific/Chatham'`);
        const result = await reader.query<{ crawled: string; updated: string }>(
          `SELECT to_char(crawled_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US') AS crawled,
                  to_char(app_updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US') AS updated
             FROM app_stats WHERE source_offset = 800`,
        );
        expect(result.rows).toEqual([{ crawled: '2026-11-30T06:00:00.123456', updated: '2025-12-31T22:30:00.000001' }]);
      } finally {
        await reader.end();
      }
    } finally {
      if (previousTz === undefined) delete process.env.TZ;
      else process.env.TZ = previousTz;
    }
  });
});

describe('rows the database refuses', () => {
  it('dead-letters a row refused by a CHECK the decoder cannot know, and stores its neighbours', async () => {
    const { run } = pipeline('reviews');
    await schema.pool.query(`ALTER TABLE reviews ADD CONSTRAINT reviews_no_forbidden CHECK (content IS DISTINCT FROM 'forbidden')`);
    try {
      const result = await run('reviews', [
        { offset: 1000, value: review({ review_id: 'gp:ok-1' }) },
        { offset: 1001, value: review({ review_id: 'gp:forbidden', content: 'forbidden' }) },
        { offset: 1002, value: review({ review_id: 'gp:ok-2' }) },
        { offset: 1003, value: review({ review_id: 'gp:ok-3' }) },
      ]);
      expect(result.response).toEqual({ batchItemFailures: [] });
      expect(result.report).toMatchObject({ records: 4, inserted: 3, deadLettered: 1 });
      const [letter] = await rows<{ reason: string; detail: string; kafka_offset: string }>(
        `SELECT reason, detail, kafka_offset FROM dead_letter_events WHERE topic = 'reviews' AND kafka_offset = 1001`,
      );
      expect(letter?.reason).toBe('rejected_by_database');
      expect(letter?.detail).toContain('23514');
      const stored = await rows(`SELECT review_id FROM reviews WHERE review_id LIKE 'gp:ok-%' ORDER BY review_id`);
      expect(stored.map((row) => row.review_id)).toEqual(['gp:ok-1', 'gp:ok-2', 'gp:ok-3']);
    } finally {
      await schema.pool.query('ALTER TABLE reviews DROP CONSTRAINT reviews_no_forbidden');
    }
  });
});

describe('application resolution', () => {
  it('sees an app registered after its first message without waiting for the cache TTL', async () => {
    const { run } = pipeline('reviews');
    const first = await run('reviews', [{ offset: 1100, value: review({ review_id: 'gp:new-app', package_name: 'com.example.new' }) }]);
    expect(first.report).toMatchObject({ inserted: 0, deadLettered: 1 });
    await schema.pool.query(`INSERT INTO apps_registry_application (id, package_name, is_active) VALUES (103, 'com.example.new', true)`);
    const second = await run('reviews', [{ offset: 1101, value: review({ review_id: 'gp:new-app', package_name: 'com.example.new' }) }]);
    expect(second.report).toMatchObject({ inserted: 1, deadLettered: 0 });
  });
});

describe('transient failures', () => {
  it('retries a batch whose connection was killed mid-transaction and stores it once', async () => {
    const { run, logger } = pipeline('reviews');
    await schema.pool.query(`
      CREATE SEQUENCE kill_once;
      CREATE FUNCTION kill_first_attempt() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        -- nextval is not rolled back: only the first attempt is killed.
        IF NEW.review_id = 'gp:killed' AND nextval('kill_once') = 1 THEN
          PERFORM pg_terminate_backend(pg_backend_pid());
        END IF;
        RETURN NEW;
      END $$;
      CREATE TRIGGER kill_first_attempt BEFORE INSERT ON reviews FOR EACH ROW EXECUTE FUNCTION kill_first_attempt();`);
    try {
      const result = await run('reviews', [
        { offset: 1200, value: 'poison' },
        { offset: 1201, value: review({ review_id: 'gp:killed' }) },
      ]);
      expect(result.response).toEqual({ batchItemFailures: [] });
      expect(result.report).toMatchObject({ inserted: 1, deadLettered: 1, attempts: 2 });
      // The retry line says which batch: two batches of one invocation never read the same.
      expect(
        logger.lines.find((line) => line.level === 'warn' && line.message.startsWith('transient database error'))?.extra,
      ).toMatchObject({
        topic: 'reviews',
        partition: 0,
        first_offset: '1200',
        last_offset: '1201',
      });
      const [data] = await rows<{ n: string }>(`SELECT count(*) AS n FROM reviews WHERE review_id = 'gp:killed'`);
      const [letters] = await rows<{ n: string }>(
        `SELECT count(*) AS n FROM dead_letter_events WHERE topic = 'reviews' AND kafka_offset = 1200`,
      );
      expect(data?.n).toBe('1');
      expect(letters?.n).toBe('1');
    } finally {
      await schema.pool.query('DROP TRIGGER kill_first_attempt ON reviews; DROP FUNCTION kill_first_attempt(); DROP SEQUENCE kill_once');
    }
  });

  it('hands the batch back when the database stays unreachable: thrown by default, reported in report mode', async () => {
    const unreachable = 'postgres://nobody@127.0.0.1:1/none';
    const records: TestRecord[] = [
      { partition: 0, offset: 7, value: review() },
      { partition: 0, offset: 5, value: review() },
      { partition: 2, offset: 9, value: review() },
    ];
    const thrower = pipeline('reviews', { STORAGE_DB_RETRY_ATTEMPTS: '2' }, unreachable);
    await expect(thrower.run('reviews', records)).rejects.toBeInstanceOf(RetryBudgetExhaustedError);
    const reporter = pipeline('reviews', { STORAGE_DB_RETRY_ATTEMPTS: '2', STORAGE_FAILURE_RESPONSE: 'report' }, unreachable);
    const reported = await reporter.run('reviews', records);
    expect(reported.response).toEqual({
      batchItemFailures: [
        { itemIdentifier: { partition: 'reviews-0', offset: 5 } },
        { itemIdentifier: { partition: 'reviews-2', offset: 9 } },
      ],
    });
    expect(reported.report).toMatchObject({ failed: true, attempts: 3 });
  });

  it('never retries past the invocation’s remaining time', async () => {
    const { run } = pipeline('reviews', { STORAGE_DB_RETRY_BASE_MS: '5000' }, 'postgres://nobody@127.0.0.1:1/none');
    const started = Date.now();
    await expect(run('reviews', [{ offset: 1, value: review() }], 3_000)).rejects.toBeInstanceOf(RetryBudgetExhaustedError);
    expect(Date.now() - started).toBeLessThan(3_000);
  });
});
