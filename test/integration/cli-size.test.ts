import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, tableRows } from '../helpers/cli.js';
import type { TestSchema } from '../helpers/database.js';
import { createMigratedSchema } from '../helpers/database.js';
import { sampleReview } from '../helpers/messages.js';

/**
 * The operator commands at production size (issue 26): 1,500 dead letters and 1,500 audit
 * entries whose ids run from 5 to 1504, across 9/10, 99/100 and 999/1000, where a text sort
 * ("10" before "9") and a keyset page taken in text order go wrong. Every assertion is on the
 * exact set of ids, computed here independently of the queries under test.
 */

const LETTERS = 1_500;
const FIRST_ID = 5;
/** Every 15th letter is an app-stats invalid_json letter (100 of them); the rest reviews unknown_application. */
const isAppStats = (index: number) => index % 15 === 7;
const LATE = { id: 303, package_name: 'com.example.size-late' };

let schema: TestSchema;
let env: Record<string, string>;
const allIds = Array.from({ length: LETTERS }, (_, index) => FIRST_ID + index);
const appStatsIds = allIds.filter((_, index) => isAppStats(index));
const reviewIds = allIds.filter((_, index) => !isAppStats(index));
const newestFirst = (ids: readonly number[]) => [...ids].sort((a, b) => b - a).map(String);
const oldestFirst = (ids: readonly number[]) => [...ids].sort((a, b) => a - b).map(String);

/** The 1,500 letters in one INSERT (arrays unnested), ids from FIRST_ID on, stored 40 days ago. */
async function insertLetters(): Promise<void> {
  const rows = allIds.map((_, index) => {
    const appStats = isAppStats(index);
    const payload = appStats
      ? Buffer.from(`{"package_name": "${LATE.package_name}", "broken": `, 'utf8')
      : Buffer.from(JSON.stringify({ ...sampleReview(), review_id: `size:${index}`, package_name: LATE.package_name }), 'utf8');
    return {
      pipeline: appStats ? 'app-stats' : 'reviews',
      topic: appStats ? 'app-stats' : 'reviews',
      partition: index % 3,
      offset: String(1000 + index),
      payload,
      reason: appStats ? 'invalid_json' : 'unknown_application',
      detail: appStats ? 'Unexpected end of JSON input' : `no application for package_name ${LATE.package_name}`,
    };
  });
  await schema.pool.query(`ALTER SEQUENCE dead_letter_events_id_seq RESTART WITH ${FIRST_ID}`);
  await schema.pool.query(
    `INSERT INTO dead_letter_events (pipeline, topic, partition, kafka_offset, payload, payload_size, payload_sha256, reason, detail, created_at)
     SELECT pipeline, topic, partition, kafka_offset, payload, octet_length(payload), sha256(payload), reason, detail,
            now() - interval '40 days' + ordinality * interval '1 second'
       FROM unnest($1::text[], $2::text[], $3::integer[], $4::bigint[], $5::bytea[], $6::text[], $7::text[])
            WITH ORDINALITY AS letter(pipeline, topic, partition, kafka_offset, payload, reason, detail, ordinality)
      ORDER BY ordinality`,
    [
      rows.map((row) => row.pipeline),
      rows.map((row) => row.topic),
      rows.map((row) => row.partition),
      rows.map((row) => row.offset),
      rows.map((row) => row.payload),
      rows.map((row) => row.reason),
      rows.map((row) => row.detail),
    ],
  );
}

/** The 1,500 audit entries in one INSERT, ids from FIRST_ID on. */
async function insertAuditEntries(): Promise<void> {
  await schema.pool.query(`ALTER SEQUENCE operator_actions_id_seq RESTART WITH ${FIRST_ID}`);
  await schema.pool.query(
    `INSERT INTO operator_actions (time, actor, command, arguments, outcome, completed_at)
     SELECT now() - interval '1 day' + g * interval '1 second', 'size@test', 'pause',
            jsonb_build_object('pipeline', 'reviews'), jsonb_build_object('n', g), now()
       FROM generate_series(1, ${LETTERS}) AS g ORDER BY g`,
  );
}

async function idRange(table: string): Promise<{ min: string; max: string; count: string }> {
  const { rows } = await schema.pool.query<{ min: string; max: string; count: string }>(
    `SELECT min(id)::text AS min, max(id)::text AS max, count(*)::text AS count FROM ${table}`,
  );
  return rows[0] as { min: string; max: string; count: string };
}

async function pendingIds(pipeline: string): Promise<string[]> {
  const { rows } = await schema.pool.query<{ id: string }>(
    'SELECT id::text AS id FROM dead_letter_events WHERE pipeline = $1 AND redriven_at IS NULL ORDER BY dead_letter_events.id',
    [pipeline],
  );
  return rows.map((row) => row.id);
}

beforeAll(async () => {
  schema = await createMigratedSchema([], 'clisize');
  // Pages of 250: the re-drive's keyset crosses 999/1000 in the middle of the run.
  env = { DATABASE_URL: schema.url, STORAGE_DB_RETRY_BASE_MS: '20', STORAGE_MAX_POLL_RECORDS_REVIEWS: '250' };
  await insertLetters();
  await insertAuditEntries();
  // The ids really cross 9/10, 99/100 and 999/1000.
  expect(await idRange('dead_letter_events')).toEqual({ min: '5', max: '1504', count: '1500' });
  expect(await idRange('operator_actions')).toEqual({ min: '5', max: '1504', count: '1500' });
});

afterAll(async () => {
  await schema?.drop();
});

describe('audit over 1,500 entries', () => {
  it('--limit N shows the newest N, oldest first, and --limit 1500 every entry once', async () => {
    const three = JSON.parse((await runCli(['audit', '--limit', '3', '--json'], env)).stdout) as { entries: Array<{ id: string }> };
    const all = JSON.parse((await runCli(['audit', '--limit', '1500', '--json'], env)).stdout) as { entries: Array<{ id: string }> };
    const table = await runCli(['audit', '--limit', '120'], env);

    expect(three.entries.map((entry) => entry.id)).toEqual(['1502', '1503', '1504']);
    expect(all.entries.map((entry) => entry.id)).toEqual(oldestFirst(allIds));
    expect(table.code).toBe(0);
    expect(
      tableRows(table.stdout)
        .slice(1)
        .map((row) => row[0]),
    ).toEqual(oldestFirst(allIds.slice(-120)));
  });
});

describe('dlq list over 1,500 letters', () => {
  it('shows the newest first: --limit 3, every letter once with --limit 1500, and a pipeline exactly', async () => {
    const three = await runCli(['dlq', 'list', '--limit', '3'], env);
    const all = JSON.parse((await runCli(['dlq', 'list', '--limit', '1500', '--json'], env)).stdout) as {
      total: number;
      letters: Array<{ id: string }>;
    };
    const appStats = JSON.parse((await runCli(['dlq', 'list', '--pipeline', 'app-stats', '--limit', '1500', '--json'], env)).stdout) as {
      total: number;
      letters: Array<{ id: string }>;
    };

    expect(three.code).toBe(0);
    expect(
      tableRows(three.stdout)
        .slice(1, -1)
        .map((row) => row[0]),
    ).toEqual(['1504', '1503', '1502']);
    expect(three.stdout).toContain(`3 of ${LETTERS} shown`);
    expect(all.total).toBe(LETTERS);
    expect(all.letters.map((letter) => letter.id)).toEqual(newestFirst(allIds));
    expect(appStats.total).toBe(100);
    expect(appStats.letters.map((letter) => letter.id)).toEqual(newestFirst(appStatsIds));
  });
});

describe('dlq redrive and purge over 1,500 letters', () => {
  it('one re-drive takes every selected letter exactly once and leaves none pending; a second re-drives 0', async () => {
    // Prepare: the app the reviews letters waited for is registered now
    await schema.pool.query('INSERT INTO apps_registry_application (id, package_name, is_active) VALUES ($1, $2, true)', [
      LATE.id,
      LATE.package_name,
    ]);
    const auditBefore = Number((await idRange('operator_actions')).max);
    expect(await pendingIds('reviews')).toEqual(oldestFirst(reviewIds));

    // Act
    const first = await runCli(['dlq', 'redrive', '--pipeline', 'reviews'], env);
    const second = await runCli(['dlq', 'redrive', '--pipeline', 'reviews'], env);
    console.log(`dlq redrive --pipeline reviews (first run):\n${first.stdout}${first.stderr}`);
    console.log(`dlq redrive --pipeline reviews (second run):\n${second.stdout}${second.stderr}`);

    // Assess: the first run met each of the 1,400 once and stored each; nothing selected is left pending
    expect(first.code).toBe(0);
    expect(first.stderr).toBe('');
    const [header, row] = tableRows(first.stdout);
    expect(header).toEqual(['PIPELINE', 'SELECTED', 'REDRIVEN', 'STILL_FAILING', 'NOT_REDRIVABLE', 'INSERTED', 'UPDATED', 'SKIPPED']);
    expect(row).toEqual(['reviews', '1400', '1400', '0', '0', '1400', '0', '0']);
    expect(first.stdout).toMatch(/\nre-driven 1400 of 1400 selected dead letter\(s\) in \d+\.\d s; 0 still failing, 0 not re-drivable\n$/);
    expect(await pendingIds('reviews')).toEqual([]);
    const stored = await schema.pool.query<{ n: string }>("SELECT count(*)::text AS n FROM reviews WHERE review_id LIKE 'size:%'");
    expect(stored.rows[0]?.n).toBe('1400');
    const marked = await schema.pool.query<{ id: string }>(
      "SELECT id::text AS id FROM dead_letter_events WHERE pipeline = 'reviews' AND redriven_at IS NOT NULL ORDER BY dead_letter_events.id",
    );
    expect(marked.rows.map((letter) => letter.id)).toEqual(oldestFirst(reviewIds));
    // One audit entry per page of 250, in id order, whose counts add up to the rows touched
    const entries = await schema.pool.query<{ outcome: { counts: Record<string, number>; ids: { first: string; last: string } } }>(
      "SELECT outcome FROM operator_actions WHERE id > $1 AND command = 'dlq redrive' ORDER BY operator_actions.id",
      [auditBefore],
    );
    expect(entries.rows.map((entry) => entry.outcome.counts.selected)).toEqual([250, 250, 250, 250, 250, 150]);
    expect(entries.rows.reduce((sum, entry) => sum + (entry.outcome.counts.redriven ?? 0), 0)).toBe(1400);
    const firstIds = entries.rows.map((entry) => Number(entry.outcome.ids.first));
    const lastIds = entries.rows.map((entry) => Number(entry.outcome.ids.last));
    expect(firstIds[0]).toBe(reviewIds[0]);
    expect(lastIds.at(-1)).toBe(reviewIds.at(-1));
    for (let page = 1; page < firstIds.length; page += 1) expect(firstIds[page]).toBeGreaterThan(lastIds[page - 1] as number);

    // The second run finds nothing to do
    expect(second.code).toBe(0);
    expect(second.stdout).toMatch(/\nre-driven 0 of 0 selected dead letter\(s\) in \d+\.\d s; 0 still failing, 0 not re-drivable\n$/);
  });

  it('a re-drive of letters that fail again names each one it left pending', async () => {
    const run = await runCli(['dlq', 'redrive', '--pipeline', 'app-stats', '--json'], env);
    const report = JSON.parse(run.stdout) as {
      pipelines: Array<{ selected: number; redriven: number; stillFailing: number; stillFailingIds: string[] }>;
    };

    expect(run.code).toBe(0);
    expect(report.pipelines).toHaveLength(1);
    expect(report.pipelines[0]).toMatchObject({ selected: 100, redriven: 0, stillFailing: 100 });
    expect(report.pipelines[0]?.stillFailingIds).toEqual(oldestFirst(appStatsIds));
    expect(await pendingIds('app-stats')).toEqual(oldestFirst(appStatsIds));
  });

  it("purge's preview names exactly the 1,400 re-driven letters (count and digest of the ids in numeric order); --yes deletes exactly them", async () => {
    const expectedDigest = createHash('md5').update(oldestFirst(reviewIds).join(','), 'utf8').digest('hex').slice(0, 12);

    const preview = JSON.parse((await runCli(['dlq', 'purge', '--older-than', '30d', '--json'], env)).stdout) as {
      wouldDelete: number;
      digest: string;
      groups: Array<{ pipeline: string; reason: string; count: number }>;
      pendingKept: number;
      command: string;
    };

    expect(preview).toMatchObject({
      wouldDelete: 1400,
      digest: expectedDigest,
      groups: [{ pipeline: 'reviews', reason: 'unknown_application', count: 1400 }],
      pendingKept: 100,
    });
    const deleted = await runCli([...preview.command.split(' ').slice(1), '--json'], env);
    expect(deleted.code).toBe(0);
    expect(JSON.parse(deleted.stdout)).toMatchObject({ deleted: 1400, digest: expectedDigest, auditId: expect.any(String) });
    const left = await schema.pool.query<{ id: string }>('SELECT id::text AS id FROM dead_letter_events ORDER BY dead_letter_events.id');
    expect(left.rows.map((letter) => letter.id)).toEqual(oldestFirst(appStatsIds));
  });
});
