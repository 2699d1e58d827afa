/**
 * `sls invoke local -f <function> -p events/<sample>.json` for every sample event, in a child
 * process, against real PostgreSQL (a fresh schema named by DATABASE_URL): what the README
 * tells a developer to run, checked for rows, dead letters and the partial batch response.
 */
import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SAMPLE_APPLICATIONS } from '../../scripts/generate-events.js';
import { createMigratedSchema } from '../helpers/database.js';
import type { TestSchema } from '../helpers/database.js';
import { SERVICE_DIRECTORY, runSls, slsEnvironment } from '../helpers/serverless.js';
import type { SlsResult } from '../helpers/serverless.js';
import { logicalId } from '../../shared/pipeline-spec.js';
import type { PipelineName } from '../../shared/pipelines.js';
import { PIPELINE_NAMES, PIPELINES } from '../../shared/pipelines.js';

interface Invocation {
  readonly result: SlsResult;
  /** The handler's return value (the last JSON document osls prints). */
  readonly response: unknown;
  /** The handler's "batch stored" log line, if any. */
  readonly batch: Record<string, unknown> | undefined;
  /** The EMF document of the batch metrics. */
  readonly metrics: Record<string, unknown> | undefined;
}

type Topic = PipelineName;
/** Each pipeline's function key in serverless.yml (`networkMetrics`) and its table. */
const FUNCTIONS = Object.fromEntries(
  PIPELINE_NAMES.map((name) => [name, logicalId(name).replace(/^./, (first) => first.toLowerCase())]),
) as Record<Topic, string>;
const TABLES = Object.fromEntries(PIPELINE_NAMES.map((name) => [name, PIPELINES[name].table.name])) as Record<Topic, string>;

/** What each sample event must do to a database with `SAMPLE_APPLICATIONS` registered. */
const EXPECTED: Record<
  string,
  {
    inserted: number;
    updated?: number;
    skipped?: number;
    deduplicated?: number;
    deadLetters: Record<string, number>;
    /** Rows still carrying this event's coordinates at the end, when a later event rewrote some. */
    rowsAtEnd?: number;
  }
> = {
  'app-stats': { inserted: 4, deadLetters: {} },
  'app-stats-poison': { inserted: 2, deadLetters: { invalid_encoding: 1, invalid_json: 1, invalid_message: 2, empty_message: 1 } },
  'app-stats-unknown-app': { inserted: 1, deadLetters: { unknown_application: 1 } },
  'app-stats-legacy': { inserted: 0, deadLetters: { invalid_message: 2 } },
  'app-stats-duplicates': { inserted: 2, deduplicated: 1, deadLetters: {} },
  reviews: { inserted: 3, deadLetters: {}, rowsAtEnd: 2 }, // reviews-stale-update rewrites gp:notes-0001
  'reviews-poison': { inserted: 2, deadLetters: { invalid_encoding: 1, invalid_message: 4 } },
  'reviews-unknown-app': { inserted: 1, deadLetters: { unknown_application: 1 } },
  'reviews-legacy': { inserted: 0, deadLetters: { invalid_message: 1 } },
  'reviews-duplicates': { inserted: 2, deduplicated: 2, deadLetters: {} },
  'reviews-stale-update': { inserted: 0, updated: 1, skipped: 1, deadLetters: {} },
  'network-metrics': { inserted: 2, deadLetters: {} },
  'network-metrics-poison': { inserted: 1, deadLetters: { invalid_json: 1, invalid_message: 3 } },
  'network-metrics-unknown-app': { inserted: 1, deadLetters: { unknown_application: 1 } },
  'network-metrics-legacy': { inserted: 0, deadLetters: { invalid_message: 1 } },
  'network-metrics-duplicates': { inserted: 2, deduplicated: 1, deadLetters: {} },
};

const topicOf = (sample: string): Topic =>
  (Object.keys(FUNCTIONS) as Topic[])
    .filter((topic) => sample === topic || sample.startsWith(`${topic}-`))
    .sort((a, b) => b.length - a.length)[0]!;

/** JSON documents osls and the handler printed: one-line log/EMF lines and the final result. */
function parseOutput(stdout: string): Omit<Invocation, 'result'> {
  const lines = stdout.split('\n');
  const jsonLines = lines.flatMap((line) => {
    if (!line.startsWith('{') || !line.endsWith('}')) return [];
    try {
      return [JSON.parse(line) as Record<string, unknown>];
    } catch {
      return [];
    }
  });
  const start = stdout.lastIndexOf('\n{\n');
  const response: unknown = start >= 0 ? JSON.parse(stdout.slice(start)) : undefined;
  return {
    response,
    batch: jsonLines.find((line) => line.message === 'batch stored' || line.message === 'batch not stored; handing it back for redelivery'),
    metrics: jsonLines.find((line) => '_aws' in line),
  };
}

async function invoke(sample: string, env: Record<string, string>, extraArgs: string[] = []): Promise<Invocation> {
  const args = ['invoke', 'local', '--function', FUNCTIONS[topicOf(sample)], '--path', `events/${sample}.json`, ...extraArgs];
  const result = await runSls(args, slsEnvironment(env), 240_000);
  return { result, ...parseOutput(result.stdout) };
}

/** Runs `work` over `items`, at most `limit` at a time. */
async function inParallel<T>(items: readonly T[], limit: number, work: (item: T) => Promise<void>): Promise<void> {
  const queue = [...items];
  await Promise.all(
    Array.from({ length: limit }, async () => {
      for (let item = queue.shift(); item !== undefined; item = queue.shift()) await work(item);
    }),
  );
}

async function coordinates(sample: string): Promise<Array<{ topic: string; partition: number; offset: number }>> {
  const event = JSON.parse(await readFile(`${SERVICE_DIRECTORY}events/${sample}.json`, 'utf8')) as {
    records: Record<string, Array<{ topic: string; partition: number; offset: number }>>;
  };
  return Object.values(event.records).flat();
}

let schema: TestSchema;
const invocations = new Map<string, Invocation>();

beforeAll(async () => {
  schema = await createMigratedSchema([...SAMPLE_APPLICATIONS], 'invoke');
  const env = { DATABASE_URL: schema.url };
  // The stale update needs `reviews` stored first; everything else is independent.
  const later = ['reviews-stale-update'];
  const first = Object.keys(EXPECTED).filter((sample) => !later.includes(sample));
  await inParallel(first, 3, async (sample) => void invocations.set(sample, await invoke(sample, env)));
  for (const sample of later) invocations.set(sample, await invoke(sample, env));
}, 1_200_000);

afterAll(async () => {
  await schema?.drop();
});

describe.each(Object.keys(EXPECTED))('sls invoke local -p events/%s.json', (sample) => {
  it('stores the rows, dead-letters the rest and answers with an empty batchItemFailures', async () => {
    const invocation = invocations.get(sample)!;
    expect(invocation.result.code, invocation.result.stderr.slice(-2000)).toBe(0);
    expect(invocation.response).toEqual({ batchItemFailures: [] });

    const expected = EXPECTED[sample]!;
    const records = await coordinates(sample);
    expect(invocation.batch).toMatchObject({
      records: records.length,
      inserted: expected.inserted,
      updated: expected.updated ?? 0,
      skipped: expected.skipped ?? 0,
      deduplicated: expected.deduplicated ?? 0,
      dead_lettered: Object.values(expected.deadLetters).reduce((sum, count) => sum + count, 0),
    });
    expect(invocation.metrics).toMatchObject({ pipeline: topicOf(sample), Records: records.length, BatchFailed: 0 });

    const letters = await schema.pool.query<{ reason: string; count: string }>(
      `SELECT reason, count(*) FROM dead_letter_events
        WHERE (topic, partition, kafka_offset) IN (SELECT * FROM unnest($1::text[], $2::int[], $3::bigint[]))
        GROUP BY reason`,
      [records.map((r) => r.topic), records.map((r) => r.partition), records.map((r) => r.offset)],
    );
    expect(Object.fromEntries(letters.rows.map((row) => [row.reason, Number(row.count)]))).toEqual(expected.deadLetters);

    const table = TABLES[topicOf(sample)];
    const written = await schema.pool.query<{ count: string }>(
      `SELECT count(*) FROM ${table} WHERE (source_partition, source_offset) IN (SELECT * FROM unnest($1::int[], $2::bigint[]))`,
      [records.map((r) => r.partition), records.map((r) => r.offset)],
    );
    expect(Number(written.rows[0]?.count)).toBe(expected.rowsAtEnd ?? expected.inserted + (expected.updated ?? 0));
  });
});

describe('what the sample events leave behind', () => {
  it('keeps the newest copy of a review, and a stale update changes nothing', async () => {
    const rows = await schema.pool.query<{ review_id: string; thumbs_up_count: number; source_offset: string }>(
      `SELECT review_id, thumbs_up_count, source_offset FROM reviews
        WHERE review_id IN ('gp:AOqpTOEx3k1s9QeV', 'gp:notes-0001', 'gp:weather-dup') ORDER BY review_id`,
    );
    expect(rows.rows).toEqual([
      { review_id: 'gp:AOqpTOEx3k1s9QeV', thumbs_up_count: 17, source_offset: '1000' }, // the older copy (offset 1040) was refused
      { review_id: 'gp:notes-0001', thumbs_up_count: 42, source_offset: '2040' },
      { review_id: 'gp:weather-dup', thumbs_up_count: 9, source_offset: '1031' }, // greatest last_synced_at of the batch
    ]);
  });

  it('stores the microseconds of the appendix message exactly', async () => {
    const { rows } = await schema.pool.query<{ crawled_at: string }>(
      `SELECT to_char(crawled_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US') AS crawled_at FROM app_stats WHERE source_offset = 100`,
    );
    expect(rows).toEqual([{ crawled_at: '2026-11-30T06:00:00.123456' }]);
  });
});

describe('a batch the database cannot take', () => {
  it('is handed back in the report form: the lowest offset of every partition, and BatchFailed = 1', async () => {
    const invocation = await invoke('reviews', {
      // Nothing listens on port 9: connection refused, a transient error, on every attempt.
      DATABASE_URL: 'postgresql://storage@127.0.0.1:9/storage',
      STORAGE_DB_RETRY_ATTEMPTS: '1',
      STORAGE_DB_RETRY_BASE_MS: '10',
      STORAGE_DB_CONNECT_TIMEOUT_MS: '500',
    });
    expect(invocation.result.code, invocation.result.stderr.slice(-2000)).toBe(0);
    expect(invocation.response).toEqual({
      batchItemFailures: [
        { itemIdentifier: { partition: 'reviews-0', offset: 1000 } },
        { itemIdentifier: { partition: 'reviews-1', offset: 2000 } },
        { itemIdentifier: { partition: 'reviews-2', offset: 3000 } },
      ],
    });
    expect(invocation.metrics).toMatchObject({ pipeline: 'reviews', BatchFailed: 1, Records: 3 });
  }, 300_000);
});
