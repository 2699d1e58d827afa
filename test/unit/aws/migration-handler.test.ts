/**
 * The migration custom resource when something around it goes wrong (aws/migration-handler.ts):
 * a Secrets Manager endpoint that accepts TCP and never answers, response PUTs that all fail,
 * a database source that ignores the deadline, and a rollback answered by the old code. No
 * PostgreSQL: every case here must be answered without one. Secrets Manager is the real AWS SDK
 * client pointed at a local TCP server; the ResponseURL a local HTTP server.
 */
import { copyFile, mkdtemp, readdir, rm } from 'node:fs/promises';
import { createServer as createHttpServer } from 'node:http';
import type { Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Logger } from '@aws-lambda-powertools/logger';
import type { CloudFormationCustomResourceEvent, Context } from 'aws-lambda';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { CustomResourceResponse } from '../../../aws/custom-resource.js';
import { createMigrationHandler } from '../../../aws/migration-handler.js';
import { secretDatabaseSource } from '../../../aws/secret-database.js';
import { migrationsHash } from '../../../shared/migrations/files.js';
import { DEFAULT_MIGRATIONS_DIRECTORY } from '../../../shared/migrations/constants.js';
import type { DatabaseSource } from '../../../shared/runtime.js';
import { testSettings } from '../../helpers/lambda-events.js';
import { pointSecretsManagerAt, SilentEndpoint } from '../../helpers/silent-endpoint.js';

/** A Lambda context whose remaining time runs down, as Lambda's does. */
function runningContext(timeoutMs: number): Context & { endsAt: number } {
  const endsAt = Date.now() + timeoutMs;
  return {
    endsAt,
    callbackWaitsForEmptyEventLoop: false,
    functionName: 'storage-consumer-test-migrate',
    functionVersion: '$LATEST',
    invokedFunctionArn: 'arn:aws:lambda:eu-west-1:000000000000:function:storage-consumer-test-migrate',
    memoryLimitInMB: '256',
    awsRequestId: 'test-request',
    logGroupName: '/aws/lambda/storage-consumer-test-migrate',
    logStreamName: '2026/12/01/[$LATEST]test',
    getRemainingTimeInMillis: () => endsAt - Date.now(),
    done: () => undefined,
    fail: () => undefined,
    succeed: () => undefined,
  };
}

/** Every JSON line the Powertools logger writes while `run` runs (stdout and stderr). */
async function capturingLogs<T>(run: () => Promise<T>): Promise<{ result: T; lines: Array<Record<string, unknown>> }> {
  const lines: Array<Record<string, unknown>> = [];
  const keep = (chunk: unknown) => {
    for (const line of String(chunk).split('\n')) {
      if (line.startsWith('{')) lines.push(JSON.parse(line) as Record<string, unknown>);
    }
    return true;
  };
  const out = vi.spyOn(process.stdout, 'write').mockImplementation(keep);
  const err = vi.spyOn(process.stderr, 'write').mockImplementation(keep);
  try {
    return { result: await run(), lines };
  } finally {
    out.mockRestore();
    err.mockRestore();
    if (process.env.STORAGE_TEST_SHOW_LOGS) for (const line of lines) console.log(JSON.stringify(line));
  }
}

const logger = () => new Logger({ serviceName: 'storage-consumer', persistentKeys: { function: 'migrate' }, logLevel: 'INFO' });

/** The ResponseURL stand-in: answers each PUT with the mode's behaviour; counts them. */
class ResponseUrl {
  readonly bodies: CustomResourceResponse[] = [];
  attempts = 0;
  mode: 'accept' | 'fail' | 'hang' = 'accept';
  private server: HttpServer | undefined;

  async start(): Promise<void> {
    this.server = createHttpServer((request, response) => {
      this.attempts += 1;
      if (this.mode === 'hang') return; // never answers; the client's timeout ends it
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        if (this.mode === 'fail') {
          response.writeHead(503).end();
          return;
        }
        this.bodies.push(JSON.parse(Buffer.concat(chunks).toString('utf8')) as CustomResourceResponse);
        response.writeHead(200).end();
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
  }

  url(): string {
    return `http://127.0.0.1:${(this.server!.address() as AddressInfo).port}/response?X-Amz-Signature=abc`;
  }

  reset(): void {
    this.bodies.length = 0;
    this.attempts = 0;
    this.mode = 'accept';
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}

const STACK_ID = 'arn:aws:cloudformation:eu-west-1:123456789012:stack/storage-consumer-prod/0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9';
const SECRET_ID = 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:storage-consumer/prod/database-Pq5rS6';

function request(
  responseUrl: string,
  type: 'Create' | 'Update' | 'Delete',
  properties: Record<string, unknown>,
  old: Record<string, unknown> = properties,
): CloudFormationCustomResourceEvent {
  const serviceToken = 'arn:aws:lambda:eu-west-1:123456789012:function:storage-consumer-prod-migrate';
  const common = {
    ServiceToken: serviceToken,
    ResponseURL: responseUrl,
    StackId: STACK_ID,
    RequestId: `request-${type}`,
    LogicalResourceId: 'SchemaMigration',
    ResourceType: 'Custom::SchemaMigration',
    ResourceProperties: { ServiceToken: serviceToken, ...properties },
  };
  const physical = { PhysicalResourceId: 'storage-consumer-prod-SchemaMigration' };
  if (type === 'Create') return { ...common, RequestType: 'Create' };
  if (type === 'Delete') return { ...common, ...physical, RequestType: 'Delete' };
  return { ...common, ...physical, RequestType: 'Update', OldResourceProperties: { ServiceToken: serviceToken, ...old } };
}

/** An endpoint nothing listens on: the database of a stack whose network is broken. */
const UNREACHABLE_DATABASE = 'postgres://storage@127.0.0.1:1/storage';

const responses = new ResponseUrl();
let hash: string;

beforeAll(async () => {
  await responses.start();
  hash = await migrationsHash(DEFAULT_MIGRATIONS_DIRECTORY);
});
afterEach(() => {
  responses.reset();
  vi.unstubAllEnvs();
});
afterAll(() => responses.stop());

describe('the migration with a Secrets Manager endpoint that accepts and never answers', () => {
  const endpoint = new SilentEndpoint();
  let endpointUrl: string;
  beforeAll(async () => {
    endpointUrl = await endpoint.start();
  });
  afterAll(() => endpoint.stop());

  it('abandons the secret read at the deadline and answers FAILED once, saying so, long before the timeout', async () => {
    // Prepare: the real SDK client, pointed at the silent endpoint; the 24-25 s function
    // timeout, so the budget (4 s) is shorter than the client's own request timeout (5 s)
    pointSecretsManagerAt(endpointUrl);
    const settings = testSettings('postgresql://storage-prod.cluster-x.eu-west-1.rds.amazonaws.com:5432/storage');
    const database = secretDatabaseSource({ secretId: SECRET_ID, base: settings.database });
    const handler = createMigrationHandler({ settings, database, logger: logger() });
    const context = runningContext(24_000);
    const started = Date.now();

    // Act
    const { lines } = await capturingLogs(() => handler(request(responses.url(), 'Create', { MigrationsHash: hash }), context));
    const returnedAfterMs = Date.now() - started;

    // Assess: one FAILED, naming the secret and the deadline; answered and returned at the budget
    expect(endpoint.connections).toBeGreaterThan(0);
    expect(responses.bodies).toHaveLength(1);
    expect(responses.bodies[0]).toMatchObject({ Status: 'FAILED', RequestId: 'request-Create' });
    expect(responses.bodies[0]!.Reason).toContain(
      `reading the database secret ${SECRET_ID} from Secrets Manager did not finish: migrations did not finish within 4 s`,
    );
    expect(returnedAfterMs).toBeGreaterThanOrEqual(4_000);
    expect(returnedAfterMs).toBeLessThan(8_000);
    const messages = lines.map((line) => line.message);
    expect(messages).toEqual(['custom resource request', 'migration failed', 'custom resource answered']);
    expect(lines.at(-1)).toMatchObject({ level: 'INFO', status: 'FAILED', function: 'migrate', function_request_id: 'test-request' });
  }, 30_000);
});

describe('the migration with a database that accepts and never answers', () => {
  const endpoint = new SilentEndpoint();
  let port: string;
  beforeAll(async () => {
    port = new URL(await endpoint.start()).port;
  });
  afterAll(() => endpoint.stop());

  it('answers FAILED naming the step, the (redacted) address and the connect timeout setting, not a bare "timeout expired"', async () => {
    // Prepare: STORAGE_DB_CONNECT_TIMEOUT_MS=2000 (testSettings)
    const handler = createMigrationHandler({ settings: testSettings(`postgres://storage:pw@127.0.0.1:${port}/storage`), logger: logger() });

    // Act
    const { lines } = await capturingLogs(() =>
      handler(request(responses.url(), 'Create', { MigrationsHash: hash }), runningContext(60_000)),
    );

    // Assess
    expect(responses.bodies).toHaveLength(1);
    expect(responses.bodies[0]).toMatchObject({
      Status: 'FAILED',
      Reason: expect.stringContaining(
        'connecting to PostgreSQL at <address> failed: timeout expired (no answer within STORAGE_DB_CONNECT_TIMEOUT_MS=2000 ms)',
      ),
    });
    expect(JSON.stringify(responses.bodies[0])).not.toContain('127.0.0.1');
    expect(lines.map((line) => line.message)).toContain('migration failed');
  }, 30_000);
});

describe('the migration when the response cannot be delivered', () => {
  it('retries PUTs that all fail (503) within the time left, logs the response as not delivered, and returns before the timeout', async () => {
    responses.mode = 'fail';
    const handler = createMigrationHandler({ settings: testSettings(UNREACHABLE_DATABASE), logger: logger() });
    const context = runningContext(12_000);

    const { lines } = await capturingLogs(() => handler(request(responses.url(), 'Delete', { MigrationsHash: hash }), context));

    expect(Date.now()).toBeLessThan(context.endsAt - 500);
    expect(responses.attempts).toBe(4);
    expect(lines.filter((line) => line.message === 'ResponseURL not reached; retrying').map((line) => line.attempt)).toEqual([1, 2, 3]);
    expect(lines.at(-1)).toMatchObject({
      level: 'ERROR',
      message: 'custom resource response not delivered; CloudFormation waits for the ServiceTimeout',
      status: 'SUCCESS',
      error: 'could not deliver the custom resource response (4 attempts): Error: ResponseURL answered 503 Service Unavailable',
    });
  }, 30_000);

  it('bounds PUTs that never answer by the time left: as many attempts as fit, then not delivered, before the timeout', async () => {
    responses.mode = 'hang';
    const handler = createMigrationHandler({ settings: testSettings(UNREACHABLE_DATABASE), logger: logger() });
    const context = runningContext(8_000);

    const { lines } = await capturingLogs(() => handler(request(responses.url(), 'Delete', { MigrationsHash: hash }), context));

    // 3 s per attempt, 0.5 s then 1 s between them, all ended 1 s before the timeout: two fit in 7 s
    expect(Date.now()).toBeLessThan(context.endsAt - 500);
    expect(responses.attempts).toBe(2);
    expect(lines.at(-1)).toMatchObject({
      level: 'ERROR',
      message: 'custom resource response not delivered; CloudFormation waits for the ServiceTimeout',
      error: expect.stringContaining('(2 attempts)'),
    });
  }, 30_000);
});

describe('the migration when something ignores the deadline', () => {
  it('answers FAILED 8 s before the timeout, exactly once, and returns', async () => {
    // A database source that never settles and ignores the abort signal
    const stuck: DatabaseSource = { settings: () => new Promise(() => undefined) };
    const handler = createMigrationHandler({ settings: testSettings(UNREACHABLE_DATABASE), database: stuck, logger: logger() });
    const context = runningContext(23_000);
    const started = Date.now();

    const { lines } = await capturingLogs(() => handler(request(responses.url(), 'Create', { MigrationsHash: hash }), context));

    expect(Date.now() - started).toBeGreaterThanOrEqual(23_000 - 8_000 - 50);
    expect(Date.now()).toBeLessThan(context.endsAt - 1_000);
    expect(responses.bodies).toHaveLength(1);
    expect(responses.bodies[0]).toMatchObject({
      Status: 'FAILED',
      Reason: expect.stringContaining("the migration did not settle: no outcome 8 s before the function's timeout"),
    });
    expect(lines.map((line) => line.message)).toContain('migration did not settle in time');
  }, 40_000);
});

describe('a rollback is decided from the request, whichever code answers', () => {
  const cleanups: Array<() => Promise<void>> = [];
  afterAll(async () => {
    for (const cleanup of cleanups) await cleanup();
  });

  /** The previous release's migrations: the repository's without its newest file. */
  async function previousRelease(): Promise<{ directory: string; hash: string; latest: number }> {
    const directory = await mkdtemp(join(tmpdir(), 'migrations-previous-'));
    cleanups.push(() => rm(directory, { recursive: true, force: true }));
    const names = (await readdir(DEFAULT_MIGRATIONS_DIRECTORY)).filter((name) => name.endsWith('.sql')).sort();
    for (const name of names.slice(0, -1)) await copyFile(join(DEFAULT_MIGRATIONS_DIRECTORY, name), join(directory, name));
    return { directory, hash: await migrationsHash(directory), latest: names.length - 1 };
  }

  /** A database source that records whether anyone asked for the database. */
  function watchedDatabase(): DatabaseSource & { asked: number } {
    const source = {
      asked: 0,
      settings: async () => {
        source.asked += 1;
        return testSettings(UNREACHABLE_DATABASE).database;
      },
    };
    return source;
  }

  it('the OLD code answering the OLD properties, with the database unreachable: SUCCESS, the database never asked for', async () => {
    // Prepare: the forward update asked for every migration (latest N) and failed; CloudFormation
    // rolls back and sends the previous release's properties (latest N-1) to the reverted code
    const previous = await previousRelease();
    const newest = previous.latest + 1;
    const database = watchedDatabase();
    const oldCode = createMigrationHandler({
      settings: testSettings(UNREACHABLE_DATABASE),
      database,
      directory: previous.directory,
      logger: logger(),
    });
    const rollback = request(
      responses.url(),
      'Update',
      { MigrationsHash: previous.hash, LatestMigration: String(previous.latest) },
      { MigrationsHash: hash, LatestMigration: String(newest) },
    );

    // Act
    const { lines } = await capturingLogs(() => oldCode(rollback, runningContext(60_000)));

    // Assess
    expect(responses.bodies).toHaveLength(1);
    expect(responses.bodies[0]).toMatchObject({
      Status: 'SUCCESS',
      PhysicalResourceId: 'storage-consumer-prod-SchemaMigration',
      Reason: expect.stringContaining(`rollback to migrations up to ${previous.latest} from ${newest}: schema left as it is`),
    });
    expect(database.asked).toBe(0);
    expect(lines.find((line) => line.level === 'WARN')).toMatchObject({
      requestedLatestMigration: previous.latest,
      previousLatestMigration: newest,
    });
  });

  it('the NEW code answering the same rollback: SUCCESS too; a request from a release without LatestMigration is older as well', async () => {
    const previous = await previousRelease();
    const newest = previous.latest + 1;
    const database = watchedDatabase();
    const newCode = createMigrationHandler({ settings: testSettings(UNREACHABLE_DATABASE), database, logger: logger() });

    await capturingLogs(() =>
      newCode(
        request(
          responses.url(),
          'Update',
          { MigrationsHash: previous.hash, LatestMigration: previous.latest },
          { MigrationsHash: hash, LatestMigration: newest },
        ),
        runningContext(60_000),
      ),
    );
    await capturingLogs(() =>
      newCode(
        request(responses.url(), 'Update', { MigrationsHash: previous.hash }, { MigrationsHash: hash, LatestMigration: newest }),
        runningContext(60_000),
      ),
    );

    expect(responses.bodies.map((body) => body.Status)).toEqual(['SUCCESS', 'SUCCESS']);
    expect(database.asked).toBe(0);
  });

  it('a forward update (more migrations than the request before it) does go to the database, and fails when it is unreachable', async () => {
    const previous = await previousRelease();
    const handler = createMigrationHandler({ settings: testSettings(UNREACHABLE_DATABASE), logger: logger() });

    await capturingLogs(() =>
      handler(
        request(
          responses.url(),
          'Update',
          { MigrationsHash: hash, LatestMigration: String(previous.latest + 1) },
          { MigrationsHash: previous.hash, LatestMigration: String(previous.latest) },
        ),
        runningContext(60_000),
      ),
    );

    expect(responses.bodies).toHaveLength(1);
    expect(responses.bodies[0]).toMatchObject({ Status: 'FAILED', Reason: expect.stringContaining('ECONNREFUSED') });
  });
});
