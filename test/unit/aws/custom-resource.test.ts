/**
 * The AWS-side adapters of the deployment: the custom resource protocol, the Secrets Manager
 * database source and the per-batch metrics. No services: the secret store is a fake fetcher.
 */
import type { Metrics } from '@aws-lambda-powertools/metrics';
import type { CloudFormationCustomResourceEvent } from 'aws-lambda';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { customResourceResponse, isCustomResourceEvent, physicalResourceIdOf } from '../../../aws/custom-resource.js';
import { connectionStringWithSecret, databaseSourceFromEnvironment, secretDatabaseSource } from '../../../aws/secret-database.js';
import type { SecretFetcher } from '../../../aws/secret-database.js';
import { ConfigurationError } from '../../../shared/errors.js';
import { BATCH_METRIC_NAMES, createPipelineMetrics, recordBatchMetrics } from '../../../aws/metrics.js';
import type { BatchReport } from '../../../shared/batch-report.js';
import { loadSettings } from '../../../shared/settings.js';

const createEvent: CloudFormationCustomResourceEvent = {
  RequestType: 'Create',
  ServiceToken: 'arn:aws:lambda:eu-west-1:123456789012:function:storage-consumer-prod-migrate',
  ResponseURL: 'https://cloudformation-custom-resource-response-euwest1.s3.eu-west-1.amazonaws.com/x',
  StackId: 'arn:aws:cloudformation:eu-west-1:123456789012:stack/storage-consumer-prod/0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9',
  RequestId: 'd1e2f3a4',
  LogicalResourceId: 'SchemaMigration',
  ResourceType: 'Custom::SchemaMigration',
  ResourceProperties: { ServiceToken: 'arn:aws:lambda:eu-west-1:123456789012:function:storage-consumer-prod-migrate', MigrationsHash: 'abc' },
};

describe('custom resource protocol', () => {
  it('tells a CloudFormation request from a direct invoke', () => {
    expect(isCustomResourceEvent(createEvent)).toBe(true);
    expect(isCustomResourceEvent({})).toBe(false);
    expect(isCustomResourceEvent({ ...createEvent, RequestType: 'Migrate' })).toBe(false);
    expect(isCustomResourceEvent({ ...createEvent, ResponseURL: undefined })).toBe(false);
    expect(isCustomResourceEvent(null)).toBe(false);
  });

  it('derives the physical id from the stack on Create and keeps the one it was given afterwards', () => {
    expect(physicalResourceIdOf(createEvent)).toBe('storage-consumer-prod-SchemaMigration');
    expect(
      physicalResourceIdOf({ ...createEvent, RequestType: 'Delete', PhysicalResourceId: 'kept-as-is' }),
    ).toBe('kept-as-is');
  });

  it('cuts a long reason so the response stays under CloudFormation\'s 4 KB', () => {
    const response = customResourceResponse(createEvent, { status: 'FAILED', reason: 'x'.repeat(10_000) }, '2026/11/30/[$LATEST]abc');
    expect(response.Reason.length).toBeLessThanOrEqual(1500);
    expect(Buffer.byteLength(JSON.stringify(response))).toBeLessThan(4096);
    expect(response).toMatchObject({ Status: 'FAILED', NoEcho: false, RequestId: 'd1e2f3a4', LogicalResourceId: 'SchemaMigration' });
  });
});

describe('database credentials from Secrets Manager', () => {
  const base = loadSettings({ DATABASE_URL: 'postgresql://storage.cluster-x.eu-west-1.rds.amazonaws.com:5432/storage', STORAGE_DB_SSL: 'verify-full' }).database;

  it('puts the credentials into the endpoint from DATABASE_URL, escaping them', () => {
    const url = new URL(connectionStringWithSecret(base.connectionString, { username: 'storage', password: 'p@ss:w/rd' }));
    expect(url.hostname).toBe('storage.cluster-x.eu-west-1.rds.amazonaws.com');
    expect(decodeURIComponent(url.username)).toBe('storage');
    expect(decodeURIComponent(url.password)).toBe('p@ss:w/rd');
    expect(url.pathname).toBe('/storage');
  });

  it("takes the endpoint from the secret when it names one (RDS's credential secrets do)", () => {
    const url = new URL(
      connectionStringWithSecret(undefined, { username: 'u', password: 'p', host: 'db.internal', port: 6432, dbname: 'analytics' }),
    );
    expect([url.hostname, url.port, url.pathname]).toEqual(['db.internal', '6432', '/analytics']);
    expect(() => connectionStringWithSecret(undefined, { username: 'u', password: 'p' })).toThrow(ConfigurationError);
  });

  it('fetches once per container, and again (forced past any cache) only after refresh()', async () => {
    const fetchSecret = vi.fn<SecretFetcher>(async () => ({ username: 'storage', password: 'first' }));
    const source = secretDatabaseSource({ secretId: 'storage/db', base, fetchSecret });

    const first = await source.settings();
    await source.settings();
    expect(fetchSecret).toHaveBeenCalledTimes(1);
    expect(fetchSecret).toHaveBeenLastCalledWith('storage/db', { forceFetch: false });
    expect(first.ssl).toBe('verify-full');

    fetchSecret.mockResolvedValue({ username: 'storage', password: 'rotated' });
    await source.refresh?.();
    const second = await source.settings();
    expect(fetchSecret).toHaveBeenCalledTimes(2);
    expect(fetchSecret).toHaveBeenLastCalledWith('storage/db', { forceFetch: true });
    expect(decodeURIComponent(new URL(second.connectionString!).password)).toBe('rotated');
  });

  it('does not cache a failed fetch', async () => {
    const fetchSecret = vi.fn<SecretFetcher>().mockRejectedValueOnce(new Error('throttled')).mockResolvedValue({ username: 'u', password: 'p' });
    const source = secretDatabaseSource({ secretId: 'storage/db', base, fetchSecret });
    await expect(source.settings()).rejects.toThrow('throttled');
    await expect(source.settings()).resolves.toMatchObject({ ssl: 'verify-full' });
  });

  it('names the unusable fields of a bad secret without echoing its value', async () => {
    const source = secretDatabaseSource({ secretId: 'storage/db', base, fetchSecret: async () => ({ user: 'x', password: 'hunter2' }) });
    const error = await source.settings().then(() => undefined, (caught: unknown) => caught as Error);
    expect(error).toBeInstanceOf(ConfigurationError);
    expect(error?.message).toContain('username');
    expect(error?.message).not.toContain('hunter2');
  });

  it('is used only when STORAGE_DB_SECRET_ID is set', () => {
    expect(databaseSourceFromEnvironment(base, {})).toBeUndefined();
    expect(databaseSourceFromEnvironment(base, { STORAGE_DB_SECRET_ID: '' })).toBeUndefined();
    expect(databaseSourceFromEnvironment(base, { STORAGE_DB_SECRET_ID: 'arn:aws:secretsmanager:eu-west-1:1:secret:x' })).toBeDefined();
  });
});

describe('batch metrics', () => {
  afterEach(() => vi.restoreAllMocks());

  const report = (overrides: Partial<BatchReport> = {}): BatchReport => ({
    pipeline: 'reviews',
    records: 10,
    inserted: 6,
    updated: 1,
    skipped: 1,
    deduplicated: 1,
    deadLettered: 1,
    alreadyDeadLettered: 2,
    durationMs: 42,
    attempts: 1,
    failed: false,
    partitions: [{ partition: 'reviews-0', first: 0, last: 9 }],
    ...overrides,
  });

  /** The EMF document Powertools prints when the metrics are flushed. */
  function flush(metrics: Metrics): Record<string, unknown> {
    const printed: string[] = [];
    vi.spyOn(console, 'log').mockImplementation((line: unknown) => void printed.push(String(line)));
    vi.spyOn(process.stdout, 'write').mockImplementation((line: string | Uint8Array) => (printed.push(String(line)), true));
    metrics.publishStoredMetrics();
    const document = printed.map((line) => line.trim()).find((line) => line.includes('"_aws"'));
    if (!document) throw new Error(`no EMF document printed: ${printed.join('\n')}`);
    return JSON.parse(document) as Record<string, unknown>;
  }

  it('emits every counter of a batch under the pipeline dimension', () => {
    const metrics = createPipelineMetrics('reviews', 'StorageConsumer/test');
    recordBatchMetrics(metrics, report());
    const emf = flush(metrics);
    expect(emf).toMatchObject({ service: 'storage-consumer', pipeline: 'reviews', Records: 10, Inserted: 6, Updated: 1, Skipped: 1, DeadLettered: 1, AlreadyDeadLettered: 2, BatchDurationMs: 42, BatchFailed: 0 });
    const directive = (emf._aws as { CloudWatchMetrics: Array<{ Namespace: string; Dimensions: string[][]; Metrics: Array<{ Name: string }> }> }).CloudWatchMetrics[0]!;
    expect(directive.Namespace).toBe('StorageConsumer/test');
    expect(directive.Dimensions).toEqual([['service', 'pipeline']]);
    expect(directive.Metrics.map((metric) => metric.Name).sort()).toEqual(Object.values(BATCH_METRIC_NAMES).sort());
  });

  it('counts a batch handed back for redelivery as BatchFailed = 1', () => {
    const metrics = createPipelineMetrics('app-stats', 'StorageConsumer/test');
    recordBatchMetrics(metrics, report({ pipeline: 'app-stats', failed: true, inserted: 0, updated: 0, skipped: 0, deadLettered: 0 }));
    expect(flush(metrics)).toMatchObject({ pipeline: 'app-stats', BatchFailed: 1, Inserted: 0 });
  });
});
