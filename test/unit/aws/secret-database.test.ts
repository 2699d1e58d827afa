/**
 * The Secrets Manager database source (aws/secret-database.ts). No services: the secret store is a
 * fake fetcher, or the real SDK client pointed at a local endpoint that never answers.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  connectionStringWithSecret,
  databaseSourceFromEnvironment,
  SECRETS_CLIENT_BOUNDS,
  secretDatabaseSource,
} from '../../../aws/secret-database.js';
import type { SecretFetcher } from '../../../aws/secret-database.js';
import { ConfigurationError } from '../../../shared/errors.js';
import { isTransientError } from '../../../shared/error-classification.js';
import { loadSettings } from '../../../shared/settings.js';
import { pointSecretsManagerAt, SilentEndpoint } from '../../helpers/silent-endpoint.js';
describe('database credentials from Secrets Manager', () => {
  const base = loadSettings({
    DATABASE_URL: 'postgresql://storage.cluster-x.eu-west-1.rds.amazonaws.com:5432/storage',
    STORAGE_DB_SSL: 'verify-full',
  }).database;

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
    const fetchSecret = vi
      .fn<SecretFetcher>()
      .mockRejectedValueOnce(new Error('throttled'))
      .mockResolvedValue({ username: 'u', password: 'p' });
    const source = secretDatabaseSource({ secretId: 'storage/db', base, fetchSecret });
    await expect(source.settings()).rejects.toThrow('throttled');
    await expect(source.settings()).resolves.toMatchObject({ ssl: 'verify-full' });
  });

  it('names the unusable fields of a bad secret without echoing its value', async () => {
    const source = secretDatabaseSource({ secretId: 'storage/db', base, fetchSecret: async () => ({ user: 'x', password: 'hunter2' }) });
    const error = await source.settings().then(
      () => undefined,
      (caught: unknown) => caught as Error,
    );
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

describe('the Secrets Manager client against an endpoint that accepts and never answers', () => {
  const endpoint = new SilentEndpoint();
  let url: string;
  beforeAll(async () => {
    url = await endpoint.start();
  });
  afterEach(() => vi.unstubAllEnvs());
  afterAll(() => endpoint.stop());
  const base = loadSettings({ DATABASE_URL: 'postgresql://storage.example:5432/storage' }).database;
  const secretId = 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:storage-consumer/prod/database-Pq5rS6';

  it('gives up by itself (request timeout, two attempts) when the caller passes no deadline, as the consumers do', async () => {
    pointSecretsManagerAt(url);
    const source = secretDatabaseSource({ secretId, base });
    const connectionsBefore = endpoint.connections;
    const started = Date.now();

    const error = await source.settings().then(
      () => undefined,
      (caught: unknown) => caught as Error,
    );

    const elapsedMs = Date.now() - started;
    expect(endpoint.connections - connectionsBefore).toBe(SECRETS_CLIENT_BOUNDS.maxAttempts);
    expect(error?.message).toMatch(
      new RegExp(`^reading the database secret ${secretId} from Secrets Manager failed: .*exceeded the configured 5000 ms requestTimeout`),
    );
    // Still the SDK's ETIMEDOUT to the consumers' retry policy: a batch retries, it is not dead-lettered.
    expect(isTransientError(error)).toBe(true);
    // Each attempt is bounded by the request timeout; the SDK backs off briefly between them.
    const bound = SECRETS_CLIENT_BOUNDS.maxAttempts * SECRETS_CLIENT_BOUNDS.requestTimeoutMs;
    expect(elapsedMs).toBeGreaterThanOrEqual(bound - 100);
    expect(elapsedMs).toBeLessThan(bound + 3_000);
  }, 30_000);

  it('abandons the read at once when the signal aborts, naming the secret and the reason', async () => {
    pointSecretsManagerAt(url);
    const source = secretDatabaseSource({ secretId, base });
    const deadline = new AbortController();
    const started = Date.now();
    setTimeout(() => deadline.abort(new Error('the deadline passed')), 300);

    await expect(source.settings({ signal: deadline.signal })).rejects.toThrow(
      `reading the database secret ${secretId} from Secrets Manager did not finish: the deadline passed`,
    );
    expect(Date.now() - started).toBeLessThan(1_500);
  });
});
