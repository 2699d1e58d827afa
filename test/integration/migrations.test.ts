import { createHash } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { appendFile, copyFile, mkdtemp, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { MigrationError } from '../../shared/errors.js';
import { loadSettings } from '../../shared/settings.js';
import {
  DEFAULT_MIGRATIONS_DIRECTORY,
  MIGRATION_LOCK_KEY,
  migrationConnection,
  runMigrations,
  schemaStatus,
} from '../../shared/migrations/index.js';
import type { MigrationLogger, MigrationReport } from '../../shared/migrations/index.js';
import { runCli, runNpm } from '../helpers/cli.js';
import { createAppsStandIn, createTestDatabase, createTestSchema } from '../helpers/database.js';
import type { TestDatabase, TestSchema } from '../helpers/database.js';

const DATA_TABLES = ['app_stats', 'dead_letter_events', 'network_metrics', 'reviews'];
/** The service's own tables besides the data tables (the audit trail, migration 0005; the pause state, 0006). */
const SERVICE_TABLES = ['operator_actions', 'pipeline_pauses'];

/** The repository's migration files, in order, and their versions (1..n). */
const MIGRATION_FILES = readdirSync(DEFAULT_MIGRATIONS_DIRECTORY)
  .filter((name) => name.endsWith('.sql'))
  .sort();
const VERSIONS = MIGRATION_FILES.map((_, index) => index + 1);
/** A file name one past the last migration, for tests that add one. */
const nextFileName = (name: string): string => `${String(MIGRATION_FILES.length + 1).padStart(4, '0')}_${name}.sql`;

interface LogLine {
  level: 'info' | 'warn';
  message: string;
  extra?: object;
}

function recordingLogger(): MigrationLogger & { lines: LogLine[] } {
  const lines: LogLine[] = [];
  return {
    lines,
    info: (message, extra) => lines.push({ level: 'info', message, extra }),
    warn: (message, extra) => lines.push({ level: 'warn', message, extra }),
  };
}

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((cleanup) => cleanup()));
});

/** A fresh schema; with the App API stand-in unless told otherwise. */
async function freshSchema({ withApps = true } = {}): Promise<TestSchema> {
  const schema = await createTestSchema('mig');
  cleanups.push(() => schema.drop());
  if (withApps) await createAppsStandIn(schema.pool);
  return schema;
}

/** A temporary copy of the repository's migrations, to tamper with. */
async function copyOfMigrations(): Promise<string> {
  const directory = await mkdtemp(join(tmpdir(), 'migrations-'));
  cleanups.push(() => rm(directory, { recursive: true, force: true }));
  for (const name of await readdir(DEFAULT_MIGRATIONS_DIRECTORY)) {
    await copyFile(join(DEFAULT_MIGRATIONS_DIRECTORY, name), join(directory, name));
  }
  return directory;
}

function migrate(schema: TestSchema, options: { directory?: string; logger?: MigrationLogger } = {}): Promise<MigrationReport> {
  return runMigrations({ connection: { connectionString: schema.url }, logger: recordingLogger(), ...options });
}

async function caught(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected the promise to reject');
}

async function tablesOf(schema: TestSchema): Promise<string[]> {
  const result = await schema.pool.query<{ table_name: string }>(
    `SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name`,
    [schema.schema],
  );
  return result.rows.map((row) => row.table_name);
}

async function trackingRows(schema: TestSchema): Promise<Array<{ version: number; name: string; checksum: string }>> {
  const result = await schema.pool.query<{ version: number; name: string; checksum: string }>(
    'SELECT version, name, checksum FROM storage_consumer_migrations ORDER BY version',
  );
  return result.rows;
}

const sha256OfFile = async (path: string): Promise<string> =>
  createHash('sha256')
    .update(await readFile(path))
    .digest('hex');

describe('runMigrations', () => {
  it('creates the four tables, their natural keys and an index for every foreign key on an empty schema', async () => {
    const schema = await freshSchema();

    const report = await migrate(schema);

    expect(report).toEqual({
      applied: MIGRATION_FILES.map((fileName, index) => ({ version: index + 1, name: fileName.slice(5, -4) })),
      alreadyApplied: 0,
      unknownApplied: [],
    });
    expect(await tablesOf(schema)).toEqual(
      [...DATA_TABLES, ...SERVICE_TABLES, 'apps_registry_application', 'storage_consumer_migrations'].sort(),
    );

    const uniqueKeys = await schema.pool.query<{ table: string; columns: string[] }>(
      `SELECT c.conrelid::regclass::text AS table,
              array(SELECT a.attname::text
                      FROM unnest(c.conkey) WITH ORDINALITY AS k(attnum, ord)
                      JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum
                     ORDER BY k.ord) AS columns
         FROM pg_constraint c
        WHERE c.contype = 'u' AND c.connamespace = $1::regnamespace
        ORDER BY c.conrelid::regclass::text`,
      [schema.schema],
    );
    expect(uniqueKeys.rows).toEqual([
      { table: 'app_stats', columns: ['application_id', 'crawled_at'] },
      { table: 'apps_registry_application', columns: ['package_name'] },
      { table: 'dead_letter_events', columns: ['topic', 'partition', 'kafka_offset', 'payload_sha256'] },
      { table: 'network_metrics', columns: ['analysis_id'] },
      { table: 'reviews', columns: ['review_id'] },
    ]);

    // An index serves a foreign key when the key's columns lead the index.
    const foreignKeys = await schema.pool.query<{ table: string; column: string; target: string; indexed: boolean }>(
      `SELECT c.conrelid::regclass::text AS table,
              a.attname::text AS column,
              c.confrelid::regclass::text AS target,
              EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.conrelid AND i.indkey[0] = c.conkey[1]) AS indexed
         FROM pg_constraint c
         JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
        WHERE c.contype = 'f' AND c.connamespace = $1::regnamespace AND cardinality(c.conkey) = 1
        ORDER BY c.conrelid::regclass::text`,
      [schema.schema],
    );
    expect(foreignKeys.rows).toEqual(
      ['app_stats', 'network_metrics', 'reviews'].map((table) => ({
        table,
        column: 'application_id',
        target: 'apps_registry_application',
        indexed: true,
      })),
    );

    expect(MIGRATION_FILES.slice(0, 7)).toEqual([
      '0001_app_stats.sql',
      '0002_reviews.sql',
      '0003_network_metrics.sql',
      '0004_dead_letter_events.sql',
      '0005_operator_actions.sql',
      '0006_pipeline_pauses.sql',
      '0007_operator_action_state.sql',
    ]);
    expect(await trackingRows(schema)).toEqual(
      await Promise.all(
        MIGRATION_FILES.map(async (fileName, index) => ({
          version: index + 1,
          name: fileName.slice(5, -4),
          checksum: await sha256OfFile(join(DEFAULT_MIGRATIONS_DIRECTORY, fileName)),
        })),
      ),
    );
  });

  it('applies nothing when run again', async () => {
    const schema = await freshSchema();
    await migrate(schema);
    const appliedAt = 'SELECT version, applied_at FROM storage_consumer_migrations ORDER BY version';
    const before = await schema.pool.query(appliedAt);

    const report = await migrate(schema);

    expect(report).toEqual({ applied: [], alreadyApplied: MIGRATION_FILES.length, unknownApplied: [] });
    const after = await schema.pool.query(appliedAt);
    expect(after.rows).toEqual(before.rows);
  });

  it('applies each file exactly once when runners race', async () => {
    const schema = await freshSchema();

    const reports = await Promise.all([migrate(schema), migrate(schema), migrate(schema)]);

    const appliedVersions = reports.flatMap((report) => report.applied.map((migration) => migration.version));
    expect(appliedVersions.sort((a, b) => a - b)).toEqual(VERSIONS);
    expect((await trackingRows(schema)).map((row) => row.version)).toEqual(VERSIONS);
  });

  it('waits for the advisory lock another session holds', async () => {
    const schema = await freshSchema();
    const holder = new pg.Client({ connectionString: schema.url });
    await holder.connect();
    cleanups.push(() => holder.end());
    await holder.query('SELECT pg_advisory_lock($1::bigint)', [MIGRATION_LOCK_KEY.toString()]);

    let settled = false;
    const run = migrate(schema).finally(() => {
      settled = true;
    });
    await new Promise((resolve) => setTimeout(resolve, 500));
    const whileLocked = await tablesOf(schema);
    const settledWhileLocked = settled;
    await holder.query('SELECT pg_advisory_unlock($1::bigint)', [MIGRATION_LOCK_KEY.toString()]);
    const report = await run;

    expect(settledWhileLocked).toBe(false);
    expect(whileLocked).toEqual(['apps_registry_application']);
    expect(report.applied).toHaveLength(MIGRATION_FILES.length);
  });

  it("refuses to run without the App API's applications table, and creates nothing", async () => {
    const schema = await freshSchema({ withApps: false });

    const error = await caught(migrate(schema));

    expect(error).toBeInstanceOf(MigrationError);
    expect(error.message).toBe("the App API's table apps_registry_application is missing: run the App API's migrations first");
    expect(await tablesOf(schema)).toEqual([]);
  });

  it('refuses a migration file changed after it was applied, naming it, and applies nothing', async () => {
    const schema = await freshSchema();
    const directory = await copyOfMigrations();
    await migrate(schema, { directory });
    await appendFile(join(directory, '0002_reviews.sql'), '\nCREATE INDEX reviews_score_idx ON reviews (score);\n');
    await writeFile(join(directory, nextFileName('later')), 'CREATE TABLE later (id INTEGER);');

    const error = await caught(migrate(schema, { directory }));

    expect(error).toBeInstanceOf(MigrationError);
    expect(error.message).toMatch(/^0002_reviews\.sql was changed after it was applied/);
    expect((await trackingRows(schema)).map((row) => row.version)).toEqual(VERSIONS);
    expect(await tablesOf(schema)).not.toContain('later');
    const status = await schemaStatus(schema.pool, { directory });
    expect(status.mismatches).toEqual([expect.objectContaining({ version: 2, fileName: '0002_reviews.sql', field: 'checksum' })]);
    expect(status.upToDate).toBe(false);
  });

  it('refuses a migration file renamed after it was applied, naming it', async () => {
    const schema = await freshSchema();
    const directory = await copyOfMigrations();
    await migrate(schema, { directory });
    await rename(join(directory, '0003_network_metrics.sql'), join(directory, '0003_network_captures.sql'));

    await expect(migrate(schema, { directory })).rejects.toThrow(
      '0003_network_captures.sql was renamed after it was applied (applied as "network_metrics")',
    );
  });

  it('accepts, with a warning, a version the database has and the code does not know', async () => {
    const schema = await freshSchema();
    await migrate(schema);
    await schema.pool.query(`INSERT INTO storage_consumer_migrations (version, name, checksum) VALUES (99, 'from_a_newer_release', 'abc')`);
    const logger = recordingLogger();

    const report = await migrate(schema, { logger });

    expect(report).toEqual({ applied: [], alreadyApplied: MIGRATION_FILES.length, unknownApplied: [99] });
    expect(logger.lines).toContainEqual({
      level: 'warn',
      message: 'the database has migrations newer than this code knows; accepting them',
      extra: { unknown_versions: [99] },
    });
  });

  it('rolls back a failing file alone: earlier files stay applied, later ones wait', async () => {
    const schema = await freshSchema();
    const directory = await copyOfMigrations();
    const realThird = await readFile(join(directory, '0003_network_metrics.sql'));
    await rm(join(directory, '0003_network_metrics.sql'));
    await writeFile(join(directory, '0003_broken.sql'), 'CREATE TABLE half_done (id INTEGER);\nSELECT * FROM no_such_table;\n');

    const error = await caught(migrate(schema, { directory }));

    expect(error).toBeInstanceOf(MigrationError);
    expect(error.message).toBe('migration 0003_broken.sql failed: relation "no_such_table" does not exist (SQLSTATE 42P01, line 2)');
    expect(error.cause).toBeInstanceOf(pg.DatabaseError);
    expect((await trackingRows(schema)).map((row) => row.version)).toEqual([1, 2]);
    expect(await tablesOf(schema)).toEqual(['app_stats', 'apps_registry_application', 'reviews', 'storage_consumer_migrations'].sort());

    // Fixed, the same directory applies the rest.
    await rm(join(directory, '0003_broken.sql'));
    await writeFile(join(directory, '0003_network_metrics.sql'), realThird);
    const report = await migrate(schema, { directory });

    expect(report.applied.map((migration) => migration.version)).toEqual(VERSIONS.slice(2));
    expect(report.alreadyApplied).toBe(2);
  });

  it('logs each applied file', async () => {
    const schema = await freshSchema();
    const logger = recordingLogger();

    await migrate(schema, { logger });

    expect(logger.lines.filter((line) => line.message === 'applied migration').map((line) => line.extra)).toEqual(
      MIGRATION_FILES.map((file, index) => ({ version: index + 1, file, duration_ms: expect.any(Number) })),
    );
  });
});

describe('schemaStatus', () => {
  it('reports every version pending on an empty schema and creates nothing', async () => {
    const schema = await freshSchema();

    const status = await schemaStatus(schema.pool);

    expect(status).toEqual({ applied: [], pending: VERSIONS, mismatches: [], unknownApplied: [], upToDate: false });
    expect(await tablesOf(schema)).toEqual(['apps_registry_application']);
  });

  it('reports an up-to-date schema after a run', async () => {
    const schema = await freshSchema();
    await migrate(schema);

    const status = await schemaStatus(schema.pool);

    expect(status).toMatchObject({ pending: [], mismatches: [], unknownApplied: [], upToDate: true });
    expect(status.applied.map((row) => [row.version, row.name])).toEqual(
      MIGRATION_FILES.map((fileName, index) => [index + 1, fileName.slice(5, -4)]),
    );
    expect(status.applied[0]?.appliedAt).toBeInstanceOf(Date);
  });
});

describe('one migration connection for every entry point', () => {
  /** A database of its own (advisory locks are per database) with two schemas, each with the App API stand-in. */
  async function twoSchemas() {
    const database = await createTestDatabase('lockwait');
    cleanups.push(() => database.drop());
    const urls: string[] = [];
    for (const name of ['first', 'second']) {
      const url = await database.schema(name);
      const pool = new pg.Pool({ connectionString: url, max: 1 });
      await createAppsStandIn(pool);
      await pool.end();
      urls.push(url);
    }
    return { database, first: urls[0] as string, second: urls[1] as string };
  }

  async function lockHeld(database: TestDatabase): Promise<boolean> {
    const { rows } = await database.pool.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
    );
    return (rows[0]?.n ?? 0) > 0;
  }

  it("`storage-consumer migrate` waits more than 30 s (the batches' statement timeout) for a runner holding the lock, and succeeds once it finishes", async () => {
    // Prepare: the first runner applies a migration that takes 32 s, holding the lock meanwhile
    const { database, first, second } = await twoSchemas();
    const directory = await copyOfMigrations();
    await writeFile(join(directory, nextFileName('slow')), 'SELECT pg_sleep(32);\n');
    const firstRun = runMigrations({
      ...migrationConnection(loadSettings({ DATABASE_URL: first }).database),
      directory,
      logger: recordingLogger(),
    });
    for (let tries = 0; !(await lockHeld(database)); tries += 1) {
      if (tries > 100) throw new Error('the first runner never took the lock');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const started = Date.now();

    // Act: the CLI with the default settings (STORAGE_DB_STATEMENT_TIMEOUT_MS 30 s for batches)
    const waiting = await runCli(['migrate', '--json'], { DATABASE_URL: second });
    const waitedMs = Date.now() - started;

    // Assess
    // It says it waits, and for whom, instead of minutes of silence
    const waitLine = JSON.parse(waiting.stderr.split('\n')[0] ?? '{}') as {
      level: string;
      message: string;
      holders: Array<{ application_name: string }>;
    };
    expect(waitLine).toMatchObject({ level: 'INFO', message: 'waiting for the migration lock, held by another runner' });
    expect(waitLine.holders.map((holder) => holder.application_name)).toEqual(['storage-consumer/migrate']);
    expect(waiting.stderr.trim().split('\n')).toHaveLength(1);
    expect(waiting.code).toBe(0);
    expect(waitedMs).toBeGreaterThan(30_000);
    expect((JSON.parse(waiting.stdout) as MigrationReport).applied.map((file) => file.version)).toEqual(VERSIONS);
    expect((await firstRun).applied.map((file) => file.version)).toEqual([...VERSIONS, VERSIONS.length + 1]);
  }, 120_000);

  it('gives up after STORAGE_MIGRATION_LOCK_TIMEOUT_MS, naming it, and applies nothing', async () => {
    // Prepare
    const { database, second } = await twoSchemas();
    const holder = await database.pool.connect();
    try {
      await holder.query('SELECT pg_advisory_lock($1::bigint)', [MIGRATION_LOCK_KEY.toString()]);

      // Act
      const run = await runCli(['migrate'], { DATABASE_URL: second, STORAGE_MIGRATION_LOCK_TIMEOUT_MS: '1000' });

      // Assess
      expect(run.code).toBe(1);
      expect(run.stderr).toContain('was not free within 1 s: another migration runner holds it');
      expect(run.stderr).toContain('STORAGE_MIGRATION_LOCK_TIMEOUT_MS');
    } finally {
      await holder.query('SELECT pg_advisory_unlock_all()');
      holder.release();
    }
    const { rows } = await database.pool.query<{ table: string | null }>(
      "SELECT to_regclass('second.storage_consumer_migrations')::text AS table",
    );
    expect(rows[0]?.table).toBeNull();
  });

  it('`npm run migrate` is the CLI command: same output, same TLS setting', async () => {
    // Prepare
    const schema = await freshSchema();
    // Act: TLS required by the setting (the test server has none), then the default
    const withTls = await runNpm('migrate', [], { DATABASE_URL: schema.url, STORAGE_DB_SSL: 'require' });
    const plain = await runNpm('migrate', [], { DATABASE_URL: schema.url });

    // Assess
    expect(withTls.code).toBe(1);
    expect(withTls.stderr).toContain('The server does not support SSL connections');
    expect(plain.code).toBe(0);
    const last = MIGRATION_FILES.at(-1)?.slice(0, -4);
    expect(plain.stdout).toContain(`applied ${last}\nschema up to date: ${MIGRATION_FILES.length} applied now, 0 already applied\n`);
  });
});
