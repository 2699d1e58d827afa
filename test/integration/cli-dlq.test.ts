import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { processBatch } from '../../shared/process-batch.js';
import type { PipelineName } from '../../shared/pipelines.js';
import { createPipelineRuntime } from '../../shared/runtime.js';
import type { TestSchema } from '../helpers/database.js';
import { createMigratedSchema } from '../helpers/database.js';
import { runBin, runCli, tableRows } from '../helpers/cli.js';
import { sampleAppStats, sampleReview } from '../helpers/messages.js';
import type { TestRecord } from '../helpers/lambda-events.js';
import { captureLogger, lambdaEvent, testSettings } from '../helpers/lambda-events.js';

const WEATHER = { id: 101, package_name: 'com.example.weather' };
const LATE = { id: 202, package_name: 'com.example.late' };

let schema: TestSchema;
let env: Record<string, string>;

/** Stores a batch through the real pipeline, as a host or Lambda would. */
async function ingest(pipeline: PipelineName, topic: string, records: readonly TestRecord[]): Promise<void> {
  const runtime = createPipelineRuntime(pipeline, testSettings(schema.url), captureLogger());
  try {
    await processBatch(lambdaEvent(topic, records), runtime, { remainingMs: () => 60_000 });
  } finally {
    await runtime.close();
  }
}

async function deadLetters(): Promise<
  Array<{ id: string; reason: string; detail: string; redriven_at: Date | null; kafka_offset: string }>
> {
  const result = await schema.pool.query(
    'SELECT id::text, reason, detail, redriven_at, kafka_offset::text FROM dead_letter_events ORDER BY dead_letter_events.id',
  );
  return result.rows;
}

async function count(table: string): Promise<number> {
  const result = await schema.pool.query<{ n: string }>(`SELECT count(*)::text AS n FROM ${table}`);
  return Number(result.rows[0]?.n);
}

const lateReview = (index: number) => ({ ...sampleReview(), review_id: `gp:late-${index}`, package_name: LATE.package_name });
const BROKEN_JSON = '{"review_id": "gp:broken", ';
const NOT_UTF8 = Buffer.from([0x7b, 0xff, 0xfe, 0x7d]);
const HUGE_INVALID = `{"review_id": "${'x'.repeat(70 * 1024)}"`;

beforeAll(async () => {
  schema = await createMigratedSchema([WEATHER], 'clidlq');
  env = { DATABASE_URL: schema.url, STORAGE_DB_RETRY_BASE_MS: '20' };
  await ingest('reviews', 'reviews', [
    { partition: 0, offset: 10, value: lateReview(1), key: 'gp:late-1', headers: [{ name: 'trace', value: 'abc' }] },
    { partition: 0, offset: 11, value: sampleReview() },
    { partition: 1, offset: 20, value: lateReview(2) },
    { partition: 1, offset: 21, value: BROKEN_JSON },
    { partition: 2, offset: 30, value: NOT_UTF8 },
    { partition: 2, offset: 31, value: HUGE_INVALID },
  ]);
  await ingest('app-stats', 'app-stats', [{ partition: 0, offset: 5, value: { ...sampleAppStats(), package_name: LATE.package_name } }]);
});

afterAll(async () => {
  await schema?.drop();
});

describe('dlq list', () => {
  it('lists every dead letter newest first, and --json carries the same figures', async () => {
    // Prepare
    const stored = await deadLetters();
    expect(stored.map((row) => row.reason).sort()).toEqual([
      'invalid_encoding',
      'invalid_json',
      'invalid_json',
      'unknown_application',
      'unknown_application',
      'unknown_application',
    ]);

    // Act
    const table = await runCli(['dlq', 'list'], env);
    const json = await runCli(['dlq', 'list', '--json'], env);

    // Assess
    expect(table.code).toBe(0);
    expect(json.code).toBe(0);
    const [header, ...rows] = tableRows(table.stdout);
    expect(header).toEqual(['ID', 'STORED', 'PIPELINE', 'COORDINATES', 'REASON', 'SIZE', 'REDRIVEN', 'DETAIL']);
    const listed = JSON.parse(json.stdout) as {
      total: number;
      letters: Array<{
        id: string;
        pipeline: string;
        topic: string;
        partition: number;
        offset: string;
        reason: string;
        payloadSize: number;
        truncated: boolean;
      }>;
    };
    expect(listed.total).toBe(6);
    expect(table.stdout).toContain('6 of 6 shown');
    const dataRows = rows.slice(0, -1);
    expect(dataRows.map((row) => row[0])).toEqual(listed.letters.map((letter) => letter.id));
    for (const [index, letter] of listed.letters.entries()) {
      const row = dataRows[index] ?? [];
      expect(row[2]).toBe(letter.pipeline);
      expect(row[3]).toBe(`${letter.topic}-${letter.partition}@${letter.offset}`);
      expect(row[4]).toBe(letter.reason);
      expect(row[5]).toBe(`${letter.payloadSize}${letter.truncated ? ' truncated' : ''}`);
    }
    expect(listed.letters.filter((letter) => letter.truncated).map((letter) => letter.offset)).toEqual(['31']);
  });

  it('filters by pipeline, reason and --since', async () => {
    const byPipeline = JSON.parse((await runCli(['dlq', 'list', '--pipeline', 'app-stats', '--json'], env)).stdout) as { total: number };
    const byReason = JSON.parse((await runCli(['dlq', 'list', '--reason', 'invalid_json', '--json'], env)).stdout) as { total: number };
    const future = JSON.parse((await runCli(['dlq', 'list', '--since', '2999-01-01', '--json'], env)).stdout) as { total: number };
    const recent = JSON.parse((await runCli(['dlq', 'list', '--since', '1h', '--json'], env)).stdout) as { total: number };

    expect(byPipeline.total).toBe(1);
    expect(byReason.total).toBe(2);
    expect(future.total).toBe(0);
    expect(recent.total).toBe(6);
  });

  it('refuses a bad filter as a usage error (exit 2)', async () => {
    const badReason = await runCli(['dlq', 'list', '--reason', 'nope'], env);
    const badSince = await runCli(['dlq', 'list', '--since', 'yesterday'], env);

    expect(badReason.code).toBe(2);
    expect(badReason.stderr).toContain('--reason must be one of');
    expect(badReason.stderr).toContain('storage-consumer dlq list --help');
    expect(badSince.code).toBe(2);
  });
});

describe('dlq show', () => {
  it('shows coordinates, reason, detail and a UTF-8 payload as text', async () => {
    const [letter] = (await deadLetters()).filter((row) => row.kafka_offset === '10');

    const shown = await runCli(['dlq', 'show', letter?.id ?? ''], env);
    const json = await runCli(['dlq', 'show', letter?.id ?? '', '--json'], env);

    expect(shown.code).toBe(0);
    expect(shown.stdout).toMatch(/coordinates:\s+reviews-0@10/);
    expect(shown.stdout).toMatch(/reason:\s+unknown_application/);
    expect(shown.stdout).toMatch(/key:\s+gp:late-1/);
    expect(shown.stdout).toContain('payload (UTF-8 text):');
    expect(shown.stdout).toContain('"review_id":"gp:late-1"');
    const parsed = JSON.parse(json.stdout) as { payload: { encoding: string; text: string }; headers: unknown[]; offset: string };
    expect(parsed.offset).toBe('10');
    expect(parsed.payload.encoding).toBe('utf8');
    expect(JSON.parse(parsed.payload.text)).toEqual(lateReview(1));
    expect(parsed.headers).toEqual([{ name: 'trace', value: Buffer.from('abc').toString('base64') }]);
  });

  it('shows a payload that is not UTF-8 as hex, and says when one was truncated', async () => {
    const rows = await deadLetters();
    const notUtf8 = rows.find((row) => row.kafka_offset === '30');
    const huge = rows.find((row) => row.kafka_offset === '31');

    const hex = await runCli(['dlq', 'show', notUtf8?.id ?? ''], env);
    const truncated = await runCli(['dlq', 'show', huge?.id ?? ''], env);

    expect(hex.stdout).toContain(`payload (hex: not valid UTF-8):\n${NOT_UTF8.toString('hex')}\n`);
    expect(truncated.stdout).toContain(`${Buffer.byteLength(HUGE_INVALID)} bytes, truncated to 65536: cannot be re-driven`);
  });

  it('exits 1 for an unknown id and 2 for a malformed one', async () => {
    expect((await runCli(['dlq', 'show', '999999'], env)).code).toBe(1);
    expect((await runCli(['dlq', 'show', 'abc'], env)).code).toBe(2);
    expect((await runCli(['dlq', 'show'], env)).code).toBe(2);
  });
});

describe('dlq redrive', () => {
  it('stores the letters whose app is now registered, marks them, leaves broken ones alone; a second run is a no-op', async () => {
    // Prepare: the app arrives after its messages; one broken letter carries an outdated detail.
    await schema.pool.query('INSERT INTO apps_registry_application (id, package_name, is_active) VALUES ($1, $2, true)', [
      LATE.id,
      LATE.package_name,
    ]);
    const broken = (await deadLetters()).find((row) => row.kafka_offset === '21');
    const originalDetail = broken?.detail;
    await schema.pool.query("UPDATE dead_letter_events SET detail = 'outdated' WHERE id = $1", [broken?.id]);
    const reviewsBefore = await count('reviews');

    // Act
    const first = await runCli(['dlq', 'redrive', '--json'], env);

    // Assess: rows appeared, their letters are marked, the rest stays pending with a fresh detail.
    expect(first.code).toBe(0);
    const report = JSON.parse(first.stdout) as {
      pipelines: Array<{
        pipeline: string;
        selected: number;
        redriven: number;
        stillFailing: number;
        inserted: number;
        notRedrivable: Array<{ why: string }>;
      }>;
    };
    const reviews = report.pipelines.find((entry) => entry.pipeline === 'reviews');
    const appStats = report.pipelines.find((entry) => entry.pipeline === 'app-stats');
    expect(reviews).toMatchObject({ selected: 5, redriven: 2, stillFailing: 2, inserted: 2 });
    expect(reviews?.notRedrivable.map((entry) => entry.why)).toEqual([
      `payload truncated to 65536 of ${Buffer.byteLength(HUGE_INVALID)} bytes`,
    ]);
    expect(appStats).toMatchObject({ selected: 1, redriven: 1, stillFailing: 0, inserted: 1 });
    expect(await count('reviews')).toBe(reviewsBefore + 2);
    expect(await count('app_stats')).toBe(1);
    const stored = await schema.pool.query(
      'SELECT review_id, source_partition, source_offset::text FROM reviews WHERE review_id LIKE $1 ORDER BY review_id',
      ['gp:late-%'],
    );
    expect(stored.rows).toEqual([
      { review_id: 'gp:late-1', source_partition: 0, source_offset: '10' },
      { review_id: 'gp:late-2', source_partition: 1, source_offset: '20' },
    ]);
    const after = await deadLetters();
    expect(after).toHaveLength(6);
    const marked = after
      .filter((row) => row.redriven_at !== null)
      .map((row) => row.kafka_offset)
      .sort();
    expect(marked).toEqual(['10', '20', '5']);
    const stillBroken = after.find((row) => row.kafka_offset === '21');
    expect(stillBroken?.redriven_at).toBeNull();
    expect(stillBroken?.detail).toBe(originalDetail);
    // Each batch's audit entry, written in that batch's transaction
    const audit = await schema.pool.query<{ actor: string; arguments: { pipeline: string }; outcome: { counts: Record<string, number> } }>(
      "SELECT actor, arguments, outcome FROM operator_actions WHERE command = 'dlq redrive' ORDER BY id",
    );
    expect(audit.rows.map((row) => [row.arguments.pipeline, row.outcome.counts])).toEqual([
      ['app-stats', { selected: 1, redriven: 1, stillFailing: 0 }],
      ['reviews', { selected: 4, redriven: 2, stillFailing: 2 }],
    ]);
    expect(audit.rows[0]?.actor).toMatch(/^.+@.+$/);

    // Act again: nothing changes.
    const second = await runCli(['dlq', 'redrive', '--json'], env);
    const again = JSON.parse(second.stdout) as typeof report;
    expect(second.code).toBe(0);
    expect(again.pipelines.map((entry) => [entry.pipeline, entry.redriven, entry.inserted])).toEqual([['reviews', 0, 0]]);
    expect(await count('reviews')).toBe(reviewsBefore + 2);
    expect(await deadLetters()).toEqual(after);
  });

  it('prints a table with the same figures, and names what it could not re-drive', async () => {
    const table = await runCli(['dlq', 'redrive', '--pipeline', 'reviews'], env);

    expect(table.code).toBe(0);
    const [header, row] = tableRows(table.stdout);
    expect(header).toEqual(['PIPELINE', 'SELECTED', 'REDRIVEN', 'STILL_FAILING', 'NOT_REDRIVABLE', 'INSERTED', 'UPDATED', 'SKIPPED']);
    expect(row).toEqual(['reviews', '3', '0', '2', '1', '0', '0', '0']);
    expect(table.stdout).toMatch(/not re-driven: dead letter \d+ \(reviews\): payload truncated/);
  });
});

describe('dlq redrive on a larger set', () => {
  it('shows its progress on a terminal after every batch, and prints a summary (--json: a summary object)', async () => {
    // Prepare: 5 reviews of an app registered after they arrived; batches of 2
    const later = { id: 303, package_name: 'com.example.later' };
    await ingest(
      'reviews',
      'reviews',
      Array.from({ length: 5 }, (_, index) => ({
        partition: 0,
        offset: 100 + index,
        value: { ...sampleReview(), review_id: `gp:later-${index}`, package_name: later.package_name },
      })),
    );
    await schema.pool.query('INSERT INTO apps_registry_application (id, package_name, is_active) VALUES ($1, $2, true)', [
      later.id,
      later.package_name,
    ]);
    const smallBatches = { ...env, STORAGE_MAX_POLL_RECORDS_REVIEWS: '2' };

    // Act
    const onTerminal = await runCli(['dlq', 'redrive', '--reason', 'unknown_application', '--json'], smallBatches, { interactive: true });
    const notOnTerminal = await runCli(['dlq', 'redrive', '--reason', 'unknown_application'], smallBatches);

    // Assess: one progress line per batch on stderr, rewritten in place; stdout stays JSON
    expect(onTerminal.code).toBe(0);
    expect(onTerminal.stderr).toBe(
      '\rreviews: 2 of 5 (40%), 2 re-driven, 0 still failing\x1b[K' +
        '\rreviews: 4 of 5 (80%), 4 re-driven, 0 still failing\x1b[K' +
        '\rreviews: 5 of 5 (100%), 5 re-driven, 0 still failing\x1b[K\n',
    );
    const report = JSON.parse(onTerminal.stdout) as { summary: Record<string, number>; pipelines: unknown[] };
    expect(report.summary).toEqual({
      selected: 5,
      redriven: 5,
      stillFailing: 0,
      notRedrivable: 0,
      inserted: 5,
      updated: 0,
      skipped: 0,
      durationMs: expect.any(Number),
    });
    expect(report.pipelines).toHaveLength(1);
    // Not a terminal: no progress; the text ends with the summary line
    expect(notOnTerminal.stderr).toBe('');
    expect(notOnTerminal.stdout).toMatch(
      /\nre-driven 0 of 0 selected dead letter\(s\) in \d+\.\d s; 0 still failing, 0 not re-drivable\n$/,
    );
  });
});

describe('dlq purge', () => {
  /** The letters a purge may take, grouped as the command groups them, straight from the table. */
  async function groupsInTable(condition: string) {
    const { rows } = await schema.pool.query<{
      pipeline: string;
      reason: string;
      count: number;
      pending: number;
      oldest: Date;
      newest: Date;
    }>(
      `SELECT pipeline, reason, count(*)::int AS count, count(*) FILTER (WHERE redriven_at IS NULL)::int AS pending,
              min(created_at) AS oldest, max(created_at) AS newest
         FROM dead_letter_events WHERE ${condition} GROUP BY pipeline, reason ORDER BY pipeline, reason`,
    );
    return rows.map((row) => ({ ...row, oldest: row.oldest.toISOString(), newest: row.newest.toISOString() }));
  }
  const totalOf = (groups: ReadonlyArray<{ count: number }>) => groups.reduce((sum, group) => sum + group.count, 0);
  const auditEntries = async () =>
    (
      await schema.pool.query<{ actor: string; command: string; arguments: Record<string, unknown>; outcome: Record<string, unknown> }>(
        "SELECT actor, command, arguments, outcome FROM operator_actions WHERE command = 'dlq purge' ORDER BY id",
      )
    ).rows;

  beforeAll(async () => {
    // Every letter was stored 40 to 44 days ago, one a day apart by id; two more pending
    // unknown_application letters (valid messages waiting for their app) of that age
    await ingest('reviews', 'reviews', [
      { partition: 0, offset: 900, value: { ...sampleReview(), review_id: 'gp:waiting-1', package_name: 'com.example.unregistered' } },
      { partition: 0, offset: 901, value: { ...sampleReview(), review_id: 'gp:waiting-2', package_name: 'com.example.unregistered' } },
    ]);
    await schema.pool.query(
      "UPDATE dead_letter_events SET created_at = date_trunc('day', now()) - interval '40 days' - (id % 5) * interval '1 day'",
    );
  });

  it('without --yes deletes nothing and prints the absolute cut-off, what it would delete, what it keeps, and the exact command', async () => {
    // Prepare
    const redriven = await groupsInTable('redriven_at IS NOT NULL');
    const pendingPlain = totalOf(
      await groupsInTable("redriven_at IS NULL AND reason NOT IN ('unknown_application', 'rejected_by_database')"),
    );
    const pendingRedrivable = totalOf(
      await groupsInTable("redriven_at IS NULL AND reason IN ('unknown_application', 'rejected_by_database')"),
    );
    expect(redriven.length).toBeGreaterThan(0);
    expect(pendingPlain).toBeGreaterThan(0);
    expect(pendingRedrivable).toBe(2);
    const before = await deadLetters();

    // Act
    const text = await runCli(['dlq', 'purge', '--older-than', '30d'], env);
    const json = await runCli(['dlq', 'purge', '--older-than', '30d', '--json'], env);

    // Assess
    expect(text.code).toBe(0);
    const total = totalOf(redriven);
    expect(text.stdout).toMatch(
      new RegExp(`^would delete ${total} re-driven dead letter\\(s\\) stored before \\S+Z \\(older than 30d\\)\n`),
    );
    const rows = tableRows(text.stdout.split('\n').slice(1).join('\n'));
    expect(rows[0]).toEqual(['PIPELINE', 'REASON', 'COUNT', 'OLDEST', 'NEWEST']);
    expect(rows.slice(1, 1 + redriven.length)).toEqual(
      redriven.map((group) => [group.pipeline, group.reason, String(group.count), group.oldest, group.newest]),
    );
    expect(text.stdout).toContain(
      `kept ${pendingPlain} pending dead letter(s) of that age, never re-driven (--include-pending to include them)\n`,
    );
    expect(text.stdout).toContain(
      `kept ${pendingRedrivable} pending unknown_application / rejected_by_database dead letter(s) of that age: each is the only copy of a valid message`,
    );
    expect(text.stdout).toMatch(
      new RegExp(
        `nothing was deleted; to delete exactly these ${total}, run:\n  storage-consumer dlq purge --before \\S+Z --expect ${total}:[0-9a-f]{12} --yes\n$`,
      ),
    );
    const report = JSON.parse(json.stdout) as Record<string, unknown>;
    expect(report).toEqual({
      olderThan: '30d',
      before: expect.stringMatching(/Z$/),
      includePending: false,
      confirmed: false,
      wouldDelete: total,
      digest: expect.stringMatching(/^[0-9a-f]{12}$/),
      groups: redriven,
      pendingKept: pendingPlain + pendingRedrivable,
      redrivableKept: pendingRedrivable,
      command: `storage-consumer dlq purge --before ${String(report.before)} --expect ${total}:${String(report.digest)} --yes`,
    });
    expect(await deadLetters()).toEqual(before);
  });

  it('the printed command deletes exactly the previewed set, in one transaction with its audit entry; a changed set is refused', async () => {
    // Prepare: a preview, then one more letter becomes purgeable (re-driven) before the --yes
    const redriven = await groupsInTable('redriven_at IS NOT NULL');
    const pendingBefore = (await deadLetters()).filter((row) => row.redriven_at === null);
    const preview = JSON.parse((await runCli(['dlq', 'purge', '--older-than', '30d', '--json'], env)).stdout) as {
      command: string;
      wouldDelete: number;
    };
    const args = preview.command.split(' ').slice(1);
    const sneaked = pendingBefore.find((row) => row.reason === 'invalid_json');
    await schema.pool.query('UPDATE dead_letter_events SET redriven_at = now() WHERE id = $1', [sneaked?.id]);

    // Act
    const changed = await runCli(args, env);
    const afterRefusal = await deadLetters();
    await schema.pool.query('UPDATE dead_letter_events SET redriven_at = NULL WHERE id = $1', [sneaked?.id]);
    const purged = await runCli([...args, '--json'], { ...env, STORAGE_ACTOR: 'ops-runbook-test' });

    // Assess: refused while the set differed, nothing deleted; then exactly the preview's set
    expect(changed.code).toBe(1);
    expect(changed.stderr).toContain(`the set changed since the preview (it had ${preview.wouldDelete} letter(s)`);
    expect(afterRefusal).toHaveLength(pendingBefore.length + totalOf(redriven));
    expect(purged.code).toBe(0);
    expect(JSON.parse(purged.stdout)).toMatchObject({
      confirmed: true,
      deleted: totalOf(redriven),
      groups: redriven,
      auditId: expect.any(String),
    });
    expect(await deadLetters()).toEqual(pendingBefore);
    const entries = await auditEntries();
    expect(entries).toHaveLength(1);
    expect(entries[0]).toMatchObject({
      actor: 'ops-runbook-test',
      command: 'dlq purge',
      arguments: { includePending: false, expect: args.at(-2) },
      outcome: { counts: { deleted: totalOf(redriven) } },
    });
  });

  it('--include-pending alone never takes a pending unknown_application letter; naming the reason does', async () => {
    // Prepare
    const plain = await groupsInTable("redriven_at IS NULL AND reason NOT IN ('unknown_application', 'rejected_by_database')");

    const everyTaken = await groupsInTable("reason NOT IN ('unknown_application', 'rejected_by_database') OR redriven_at IS NOT NULL");

    // Act
    const preview = await runCli(['dlq', 'purge', '--older-than', '30d', '--include-pending'], env);
    const purged = await runCli(['dlq', 'purge', '--older-than', '30d', '--include-pending', '--yes'], env);
    const left = await deadLetters();
    const named = await runCli(
      ['dlq', 'purge', '--older-than', '30d', '--include-pending', '--reason', 'unknown_application', '--yes', '--json'],
      env,
    );

    // Assess: the preview says which of the letters are pending, per group and in all
    const previewRows = tableRows(preview.stdout.split('\n').slice(1).join('\n'));
    expect(previewRows[0]).toEqual(['PIPELINE', 'REASON', 'COUNT', 'PENDING', 'OLDEST', 'NEWEST']);
    expect(previewRows.slice(1, 1 + everyTaken.length)).toEqual(
      everyTaken.map((group) => [group.pipeline, group.reason, String(group.count), String(group.pending), group.oldest, group.newest]),
    );
    const pendingTaken = everyTaken.reduce((sum, group) => sum + group.pending, 0);
    expect(pendingTaken).toBe(totalOf(plain));
    expect(preview.stdout).toContain(`of them ${pendingTaken} pending (never re-driven: their messages are gone for good once deleted;`);
    expect(purged.code).toBe(0);
    expect(purged.stdout).toMatch(new RegExp(`^deleted ${totalOf(everyTaken)} dead letter\\(s\\), pending or re-driven, stored before `));
    expect(purged.stdout).toContain('kept 2 pending unknown_application / rejected_by_database dead letter(s) of that age');
    expect(left.map((row) => row.reason)).toEqual(['unknown_application', 'unknown_application']);
    expect(JSON.parse(named.stdout)).toMatchObject({ confirmed: true, deleted: 2, redrivableKept: 0 });
    expect(await count('dead_letter_events')).toBe(0);
    expect((await auditEntries()).map((entry) => entry.arguments.reason ?? null)).toEqual([null, null, 'unknown_application']);
  });

  it('has a minimum age of 1d, and needs exactly one valid cut-off (exit 2)', async () => {
    const tooYoung = await runCli(['dlq', 'purge', '--older-than', '12h', '--yes'], env);
    expect(tooYoung.code).toBe(2);
    expect(tooYoung.stderr).toContain('--older-than must be at least 1d, got 12h');
    const tooRecent = await runCli(['dlq', 'purge', '--before', new Date().toISOString()], env);
    expect(tooRecent.code).toBe(2);
    expect(tooRecent.stderr).toContain('--before must be at least 1d ago');
    expect((await runCli(['dlq', 'purge', '--older-than', '0s', '--include-pending', '--yes'], env)).code).toBe(2);
    expect((await runCli(['dlq', 'purge'], env)).code).toBe(2);
    expect((await runCli(['dlq', 'purge', '--older-than', '30d', '--before', '2026-01-01'], env)).code).toBe(2);
    expect((await runCli(['dlq', 'purge', '--older-than', '30 days'], env)).code).toBe(2);
    expect((await runCli(['dlq', 'purge', '--older-than', '30d', '--expect', '3:abc', '--yes'], env)).code).toBe(2);
  });
});

describe('the storage-consumer bin', () => {
  it('runs the TypeScript CLI and exits with its codes', async () => {
    const listed = await runBin(['dlq', 'list', '--json'], env);
    const missing = await runBin(['dlq', 'show', '999999'], env);
    const usage = await runBin(['dlq', 'list', '--bogus'], env);
    const unknown = await runBin(['frobnicate'], env);

    expect(listed.code).toBe(0);
    expect((JSON.parse(listed.stdout) as { total: number }).total).toBe(await count('dead_letter_events'));
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('no dead letter with id 999999');
    expect(usage.code).toBe(2);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("unknown command 'frobnicate'");
  });

  it('runs the host through `run`: a missing setting stops it with exit 1', async () => {
    const run = await runBin(['run'], env);

    expect(run.code).toBe(1);
    expect(`${run.stdout}${run.stderr}`).toContain('KAFKA_BROKERS is required');
  });
});
