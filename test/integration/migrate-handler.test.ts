/**
 * The migration custom resource against real PostgreSQL, with a local HTTP server standing in
 * for CloudFormation's presigned ResponseURL.
 */
import { createServer } from 'node:http';
import type { IncomingHttpHeaders, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Logger } from '@aws-lambda-powertools/logger';
import type { CloudFormationCustomResourceEvent } from 'aws-lambda';
import { readdirSync } from 'node:fs';
import { copyFile, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { CustomResourceResponse } from '../../aws/custom-resource.js';
import { createMigrationHandler } from '../../aws/migration-handler.js';
import { migrationsHash } from '../../shared/migrations/files.js';
import { runMigrations } from '../../shared/migrations/run.js';
import { DEFAULT_MIGRATIONS_DIRECTORY, MIGRATION_LOCK_KEY } from '../../shared/migrations/constants.js';
import type { MigrationReport } from '../../shared/migrations/model.js';
import { createAppsStandIn, createTestDatabase, createTestSchema } from '../helpers/database.js';
import type { TestDatabase, TestSchema } from '../helpers/database.js';
import { lambdaContext, testSettings } from '../helpers/lambda-events.js';

/** Versions of the repository's migration files (1..n). */
const VERSIONS = readdirSync(DEFAULT_MIGRATIONS_DIRECTORY)
  .filter((name) => name.endsWith('.sql'))
  .map((_, index) => index + 1);

interface ReceivedResponse {
  readonly method: string | undefined;
  readonly path: string | undefined;
  readonly headers: IncomingHttpHeaders;
  readonly body: CustomResourceResponse;
}

/** The stand-in for S3's presigned URL: records every PUT; answers with the queued statuses. */
class ResponseUrl {
  readonly received: ReceivedResponse[] = [];
  readonly statuses: number[] = [];
  private server: Server | undefined;

  async start(): Promise<void> {
    this.server = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        const status = this.statuses.shift() ?? 200;
        if (status === 200) {
          this.received.push({
            method: request.method,
            path: request.url,
            headers: request.headers,
            body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as CustomResourceResponse,
          });
        }
        response.writeHead(status).end();
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
  }

  url(path: string): string {
    const { port } = this.server!.address() as AddressInfo;
    return `http://127.0.0.1:${port}${path}`;
  }

  last(): ReceivedResponse {
    const response = this.received.at(-1);
    if (!response) throw new Error('nothing was PUT to the ResponseURL');
    return response;
  }

  async stop(): Promise<void> {
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}

const STACK_ID = 'arn:aws:cloudformation:eu-west-1:123456789012:stack/storage-consumer-dev/1f2e3d4c-5b6a-7980-a1b2-c3d4e5f60718';
const silentLogger = () => new Logger({ serviceName: 'storage-consumer', logLevel: 'SILENT' });

function event(
  responseUrl: string,
  requestType: 'Create' | 'Update' | 'Delete',
  properties: Record<string, string>,
): CloudFormationCustomResourceEvent {
  const common = {
    ServiceToken: 'arn:aws:lambda:eu-west-1:123456789012:function:storage-consumer-dev-migrate',
    ResponseURL: responseUrl,
    StackId: STACK_ID,
    RequestId: `request-${requestType}`,
    LogicalResourceId: 'SchemaMigration',
    ResourceType: 'Custom::SchemaMigration',
    ResourceProperties: { ServiceToken: 'arn:aws:lambda:eu-west-1:123456789012:function:storage-consumer-dev-migrate', ...properties },
  };
  if (requestType === 'Create') return { ...common, RequestType: 'Create' };
  const physical = { PhysicalResourceId: 'storage-consumer-dev-SchemaMigration' };
  if (requestType === 'Delete') return { ...common, ...physical, RequestType: 'Delete' };
  return { ...common, ...physical, RequestType: 'Update', OldResourceProperties: common.ResourceProperties };
}

async function tables(schema: TestSchema): Promise<string[]> {
  const result = await schema.pool.query<{ table_name: string }>(
    'SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY table_name',
  );
  return result.rows.map((row) => row.table_name);
}

const responseUrl = new ResponseUrl();
const schemas: TestSchema[] = [];
let hash: string;

beforeAll(async () => {
  await responseUrl.start();
  hash = await migrationsHash(DEFAULT_MIGRATIONS_DIRECTORY);
});
afterEach(() => {
  responseUrl.received.length = 0;
  responseUrl.statuses.length = 0;
});
afterAll(async () => {
  await responseUrl.stop();
  await Promise.all(schemas.map((schema) => schema.drop()));
});

async function schemaWithApps(withStandIn: boolean): Promise<TestSchema> {
  const schema = await createTestSchema('migrate');
  schemas.push(schema);
  if (withStandIn) await createAppsStandIn(schema.pool, [{ id: 1, package_name: 'com.example.weather' }]);
  return schema;
}

describe('the migration custom resource', () => {
  it('migrates on Create and answers SUCCESS with a stable physical id; an Update with the same hash applies nothing', async () => {
    const schema = await schemaWithApps(true);
    const handler = createMigrationHandler({ settings: testSettings(schema.url), logger: silentLogger() });

    await handler(event(responseUrl.url('/create?X-Amz-Signature=abc'), 'Create', { MigrationsHash: hash }), lambdaContext(600_000));

    const created = responseUrl.last();
    expect(created.method).toBe('PUT');
    expect(created.path).toBe('/create?X-Amz-Signature=abc');
    expect(created.headers['content-type'] ?? '').toBe(''); // what a presigned S3 URL expects
    expect(created.body).toMatchObject({
      Status: 'SUCCESS',
      PhysicalResourceId: 'storage-consumer-dev-SchemaMigration',
      StackId: STACK_ID,
      RequestId: 'request-Create',
      LogicalResourceId: 'SchemaMigration',
      Data: { MigrationsHash: hash, LatestMigration: String(Math.max(...VERSIONS)), Applied: VERSIONS.join(',') },
    });
    expect(await tables(schema)).toEqual(
      expect.arrayContaining(['app_stats', 'dead_letter_events', 'network_metrics', 'reviews', 'storage_consumer_migrations']),
    );

    await handler(event(responseUrl.url('/update'), 'Update', { MigrationsHash: hash }), lambdaContext(600_000));
    expect(responseUrl.last().body).toMatchObject({
      Status: 'SUCCESS',
      PhysicalResourceId: 'storage-consumer-dev-SchemaMigration',
      Data: { MigrationsHash: hash, LatestMigration: String(Math.max(...VERSIONS)), Applied: '' },
    });
  });

  it("answers FAILED with the MigrationError's message when the App API's table is missing, and creates nothing", async () => {
    const schema = await schemaWithApps(false);
    const handler = createMigrationHandler({ settings: testSettings(schema.url), logger: silentLogger() });

    await handler(event(responseUrl.url('/failed'), 'Create', { MigrationsHash: hash }), lambdaContext(600_000));

    const { body } = responseUrl.last();
    expect(body.Status).toBe('FAILED');
    expect(body.Reason).toContain("the App API's table apps_registry_application is missing: run the App API's migrations first");
    expect(body.PhysicalResourceId).toBe('storage-consumer-dev-SchemaMigration');
    expect(await tables(schema)).toEqual([]);
  });

  it('answers SUCCESS on Delete and leaves the schema and its data alone', async () => {
    const schema = await schemaWithApps(true);
    const handler = createMigrationHandler({ settings: testSettings(schema.url), logger: silentLogger() });
    await handler(event(responseUrl.url('/create'), 'Create', { MigrationsHash: hash }), lambdaContext(600_000));
    const before = await tables(schema);

    await handler(event(responseUrl.url('/delete'), 'Delete', { MigrationsHash: hash }), lambdaContext(600_000));

    expect(responseUrl.last().body).toMatchObject({ Status: 'SUCCESS', PhysicalResourceId: 'storage-consumer-dev-SchemaMigration' });
    expect(await tables(schema)).toEqual(before);
  });

  it('answers SUCCESS without migrating when an Update carries another hash (a rollback restoring old properties)', async () => {
    const schema = await schemaWithApps(true);
    const handler = createMigrationHandler({ settings: testSettings(schema.url), logger: silentLogger() });

    await handler(event(responseUrl.url('/rollback'), 'Update', { MigrationsHash: 'the-previous-release' }), lambdaContext(600_000));

    expect(responseUrl.last().body).toMatchObject({ Status: 'SUCCESS', Reason: expect.stringContaining('rollback') });
    expect(await tables(schema)).toEqual(['apps_registry_application']);
  });

  it('retries the ResponseURL after a 5xx', async () => {
    const schema = await schemaWithApps(true);
    const handler = createMigrationHandler({ settings: testSettings(schema.url), logger: silentLogger() });
    responseUrl.statuses.push(503);

    await handler(event(responseUrl.url('/flaky'), 'Delete', { MigrationsHash: hash }), lambdaContext(600_000));

    expect(responseUrl.received).toHaveLength(1);
    expect(responseUrl.last().body.Status).toBe('SUCCESS');
  });
});

describe('the migrate function invoked directly', () => {
  it('migrates and returns the report', async () => {
    const schema = await schemaWithApps(true);
    const handler = createMigrationHandler({ settings: testSettings(schema.url), logger: silentLogger() });

    const report = (await handler({}, lambdaContext(600_000))) as MigrationReport;

    expect(report.applied.map((file) => file.version)).toEqual(VERSIONS);
    expect(responseUrl.received).toEqual([]);
  });

  it('fails with the MigrationError when the App API table is missing', async () => {
    const schema = await schemaWithApps(false);
    const handler = createMigrationHandler({ settings: testSettings(schema.url), logger: silentLogger() });

    await expect(handler({}, lambdaContext(600_000))).rejects.toThrow(/run the App API's migrations first/);
  });
});

describe('the migration custom resource at its deadline', () => {
  /**
   * A database of its own (advisory locks are per database, so no other test file's runner can
   * hold the lock this test checks), with the App API stand-in, and a migrations directory of
   * the repository's files plus `extra` as the next version.
   */
  async function slowSetup(extra: string) {
    const database = await createTestDatabase('deadline');
    cleanups.push(() => database.drop());
    await createAppsStandIn(database.pool, [{ id: 1, package_name: 'com.example.weather' }]);
    const directory = await mkdtemp(join(tmpdir(), 'migrations-deadline-'));
    cleanups.push(() => rm(directory, { recursive: true, force: true }));
    for (const name of await readdir(DEFAULT_MIGRATIONS_DIRECTORY))
      await copyFile(join(DEFAULT_MIGRATIONS_DIRECTORY, name), join(directory, name));
    await writeFile(join(directory, `${String(VERSIONS.length + 1).padStart(4, '0')}_slow.sql`), extra);
    const handler = createMigrationHandler({ settings: testSettings(database.url), logger: silentLogger(), directory });
    return { database, handler, hash: await migrationsHash(directory) };
  }

  async function appliedVersions(database: TestDatabase): Promise<number[]> {
    const { rows } = await database.pool.query<{ version: number }>('SELECT version FROM storage_consumer_migrations ORDER BY version');
    return rows.map((row) => row.version);
  }

  async function lockIsFree(database: TestDatabase): Promise<boolean> {
    const client = await database.pool.connect();
    try {
      const { rows } = await client.query<{ free: boolean }>('SELECT pg_try_advisory_lock($1::bigint) AS free', [
        MIGRATION_LOCK_KEY.toString(),
      ]);
      if (rows[0]?.free) await client.query('SELECT pg_advisory_unlock($1::bigint)', [MIGRATION_LOCK_KEY.toString()]);
      return rows[0]?.free === true;
    } finally {
      client.release();
    }
  }

  async function sessionsRunning(database: TestDatabase, marker: string): Promise<number> {
    const { rows } = await database.pool.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND query LIKE '%' || $1 || '%' AND pid <> pg_backend_pid()",
      [marker],
    );
    return rows[0]?.n ?? -1;
  }

  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  it('cancels a migration still running at the deadline, then answers FAILED: nothing of it stays, the lock is free, it never commits later', async () => {
    // Prepare: the next migration creates a table, then sleeps in short statements (each well within the
    // statement timeout), 20 s in all; the budget is 3 s (23 s left, 20 s kept back)
    const marker = `slow_${Date.now()}`;
    const {
      database,
      handler,
      hash: slowHash,
    } = await slowSetup(
      `CREATE TABLE slow_marker (id integer);\n${Array.from({ length: 50 }, () => `SELECT pg_sleep(0.4) AS ${marker};`).join('\n')}\n`,
    );
    const started = Date.now();

    // Act
    await handler(event(responseUrl.url('/deadline'), 'Create', { MigrationsHash: slowHash }), lambdaContext(23_000));
    const answeredAfterMs = Date.now() - started;

    // Assess: FAILED, and by the time it was answered the migration was gone
    const { body } = responseUrl.last();
    expect(body.Status).toBe('FAILED');
    expect(body.Reason).toMatch(
      /migrations did not finish within 3 s \(the function's timeout\): the running statement was cancelled, its transaction rolled back and the migration lock released/,
    );
    expect(answeredAfterMs).toBeGreaterThanOrEqual(3_000);
    expect(answeredAfterMs).toBeLessThan(15_000);
    expect(await sessionsRunning(database, marker)).toBe(0);
    expect(await lockIsFree(database)).toBe(true);
    expect(await appliedVersions(database)).toEqual(VERSIONS);
    const { rows } = await database.pool.query<{ table: string | null }>("SELECT to_regclass('slow_marker')::text AS table");
    expect(rows[0]?.table).toBeNull();
    // ... and it does not commit later
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(await appliedVersions(database)).toEqual(VERSIONS);
  });

  it('keeps the statement timeout below the budget: one long statement is stopped by the server itself, FAILED, nothing stays', async () => {
    // Prepare: one statement of 60 s; the budget is 3 s, the statement timeout 2 s. The
    // repository's migrations are applied beforehand, so the budget is the slow file's alone
    // (applying them all first could leave less than the statement timeout on a loaded machine).
    const { database, handler, hash: slowHash } = await slowSetup('CREATE TABLE slow_marker (id integer);\nSELECT pg_sleep(60);\n');
    await runMigrations({ connection: { connectionString: database.url }, logger: { info: () => undefined, warn: () => undefined } });

    // Act
    await handler(event(responseUrl.url('/statement-timeout'), 'Create', { MigrationsHash: slowHash }), lambdaContext(23_000));

    // Assess
    const { body } = responseUrl.last();
    expect(body.Status).toBe('FAILED');
    expect(body.Reason).toContain(
      `migration ${String(VERSIONS.length + 1).padStart(4, '0')}_slow.sql failed: canceling statement due to statement timeout (SQLSTATE 57014`,
    );
    expect(await lockIsFree(database)).toBe(true);
    expect(await appliedVersions(database)).toEqual(VERSIONS);
  });

  it("bounds the wait for another runner's lock below the budget, and answers FAILED saying so", async () => {
    // Prepare: another session holds the migration lock
    const { database, handler, hash: slowHash } = await slowSetup('SELECT 1;\n');
    const holder = await database.pool.connect();
    try {
      await holder.query('SELECT pg_advisory_lock($1::bigint)', [MIGRATION_LOCK_KEY.toString()]);

      // Act
      await handler(event(responseUrl.url('/locked'), 'Create', { MigrationsHash: slowHash }), lambdaContext(23_000));
    } finally {
      await holder.query('SELECT pg_advisory_unlock_all()');
      holder.release();
    }

    // Assess
    const { body } = responseUrl.last();
    expect(body.Status).toBe('FAILED');
    expect(body.Reason).toContain('was not free within 2 s: another migration runner holds it');
    const { rows } = await database.pool.query<{ table: string | null }>(
      "SELECT to_regclass('storage_consumer_migrations')::text AS table",
    );
    expect(rows[0]?.table).toBeNull();
  });

  it('answers FAILED at once when the function timeout leaves no time to migrate', async () => {
    const schema = await schemaWithApps(true);
    const handler = createMigrationHandler({ settings: testSettings(schema.url), logger: silentLogger() });

    await handler(event(responseUrl.url('/short'), 'Create', { MigrationsHash: hash }), lambdaContext(20_500));

    expect(responseUrl.last().body).toMatchObject({
      Status: 'FAILED',
      Reason: expect.stringContaining("the function's timeout leaves 0.5 s to migrate"),
    });
    expect(await tables(schema)).toEqual(['apps_registry_application']);
  });
});

describe('the migrate entry point with a bad setting', () => {
  afterEach(() => {
    vi.unstubAllEnvs();
    vi.resetModules();
  });

  it('still loads, and answers CloudFormation FAILED naming the variable; a direct invoke fails with it', async () => {
    // Prepare: the module is loaded with the bad value, as Lambda would load it
    vi.stubEnv('STORAGE_DB_SSL', 'sometimes');
    vi.stubEnv('POWERTOOLS_LOG_LEVEL', 'SILENT');
    vi.resetModules();
    const { handler } = await import('../../handlers/migrate.js');

    // Act
    await handler(event(responseUrl.url('/bad-setting'), 'Create', { MigrationsHash: hash }), lambdaContext(600_000));

    // Assess
    const { body } = responseUrl.last();
    expect(body.Status).toBe('FAILED');
    expect(body.Reason).toContain('STORAGE_DB_SSL="sometimes" is invalid: must be disable, require or verify-full');
    await expect(handler({}, lambdaContext(600_000))).rejects.toThrow(/STORAGE_DB_SSL/);
  });
});
