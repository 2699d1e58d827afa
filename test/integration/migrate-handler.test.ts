/**
 * The migration custom resource against real PostgreSQL, with a local HTTP server standing in
 * for CloudFormation's presigned ResponseURL.
 */
import { createServer } from 'node:http';
import type { IncomingHttpHeaders, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Logger } from '@aws-lambda-powertools/logger';
import type { CloudFormationCustomResourceEvent } from 'aws-lambda';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { CustomResourceResponse } from '../../aws/custom-resource.js';
import { createMigrationHandler } from '../../handlers/migrate.js';
import { migrationsHash } from '../../shared/migrations/files.js';
import { DEFAULT_MIGRATIONS_DIRECTORY, MIGRATION_LOCK_KEY } from '../../shared/migrations/constants.js';
import type { MigrationReport } from '../../shared/migrations/types.js';
import { createAppsStandIn, createTestSchema } from '../helpers/database.js';
import type { TestSchema } from '../helpers/database.js';
import { lambdaContext, testSettings } from '../helpers/pipeline.js';

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
      Data: { MigrationsHash: hash, Applied: '1,2,3,4' },
    });
    expect(await tables(schema)).toEqual(
      expect.arrayContaining(['app_stats', 'dead_letter_events', 'network_metrics', 'reviews', 'storage_consumer_migrations']),
    );

    await handler(event(responseUrl.url('/update'), 'Update', { MigrationsHash: hash }), lambdaContext(600_000));
    expect(responseUrl.last().body).toMatchObject({
      Status: 'SUCCESS',
      PhysicalResourceId: 'storage-consumer-dev-SchemaMigration',
      Data: { MigrationsHash: hash, Applied: '' },
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

  it('answers FAILED before the function would time out', async () => {
    const schema = await schemaWithApps(true);
    const handler = createMigrationHandler({ settings: testSettings(schema.url), logger: silentLogger() });
    // Another runner holds the migration lock, so this one waits on it.
    const holder = await schema.pool.connect();
    try {
      await holder.query('SELECT pg_advisory_lock($1::bigint)', [MIGRATION_LOCK_KEY.toString()]);
      // 15.5 s left: 15 s are kept back for the answer, so the migration gets 0.5 s.
      await handler(event(responseUrl.url('/slow'), 'Create', { MigrationsHash: hash }), lambdaContext(15_500));
    } finally {
      await holder.query('SELECT pg_advisory_unlock_all()');
      holder.release();
    }
    expect(responseUrl.last().body).toMatchObject({ Status: 'FAILED', Reason: expect.stringContaining("function's timeout") });
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

    expect(report.applied.map((file) => file.version)).toEqual([1, 2, 3, 4]);
    expect(responseUrl.received).toEqual([]);
  });

  it('fails with the MigrationError when the App API table is missing', async () => {
    const schema = await schemaWithApps(false);
    const handler = createMigrationHandler({ settings: testSettings(schema.url), logger: silentLogger() });

    await expect(handler({}, lambdaContext(600_000))).rejects.toThrow(/run the App API's migrations first/);
  });
});
