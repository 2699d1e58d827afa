/**
 * Database credentials from AWS Secrets Manager, plugged into the pipeline as a `DatabaseSource`.
 * Lives outside `shared/` because it needs the AWS SDK; the core only sees the interface.
 */
import { getSecret } from '@aws-lambda-powertools/parameters/secrets';
import { z } from 'zod';
import type { Environment } from '../shared/env.js';
import { loadSetting } from '../shared/setting.js';
import { STORAGE_DB_SECRET_ID } from '../shared/setting-declarations.js';
import { ConfigurationError } from '../shared/errors.js';
import type { DatabaseSource } from '../shared/runtime.js';
import type { DatabaseSettings } from '../shared/settings.js';

/**
 * The secret's JSON, as RDS and Secrets Manager's rotation templates write it: `username` and
 * `password`, and optionally `host`, `port` and `dbname` (an RDS-managed master secret has only
 * the first two; the endpoint then comes from `DATABASE_URL`). Other fields are ignored.
 */
const databaseSecret = z.object({
  username: z.string().min(1),
  password: z.string(),
  host: z.string().min(1).optional(),
  port: z.union([z.number().int().positive(), z.string().regex(/^\d+$/)]).optional(),
  dbname: z.string().min(1).optional(),
});

/** The secret as parsed; exported for tests. */
export type DatabaseSecret = z.infer<typeof databaseSecret>;

/** Reads a secret's value; `forceFetch` bypasses any cache (after a rotation). */
export type SecretFetcher = (secretId: string, options: { readonly forceFetch: boolean }) => Promise<unknown>;

/** Powertools Parameters: one GetSecretValue per call here, since this module does the caching. */
const fetchWithPowertools: SecretFetcher = (secretId, { forceFetch }) => getSecret(secretId, { transform: 'json', forceFetch });

/** Options of `secretDatabaseSource`. */
export interface SecretDatabaseSourceOptions {
  readonly secretId: string;
  /** Timeouts, pool size, TLS, and the endpoint when the secret names none (`DATABASE_URL`). */
  readonly base: DatabaseSettings;
  readonly fetchSecret?: SecretFetcher;
}

/**
 * Puts the secret's credentials (and endpoint, when it has one) into the base connection
 * string. Without a base connection string, the secret must name the host.
 */
export function connectionStringWithSecret(base: string | undefined, secret: DatabaseSecret): string {
  if (base === undefined && secret.host === undefined) {
    throw new ConfigurationError(`the database secret has no host and DATABASE_URL is not set: one of them must name the endpoint`);
  }
  const url = new URL(base ?? 'postgresql://localhost/');
  url.username = encodeURIComponent(secret.username);
  url.password = encodeURIComponent(secret.password);
  if (secret.host !== undefined) url.hostname = secret.host;
  if (secret.port !== undefined) url.port = String(secret.port);
  if (secret.dbname !== undefined) url.pathname = `/${encodeURIComponent(secret.dbname)}`;
  return url.toString();
}

/**
 * A `DatabaseSource` reading credentials from Secrets Manager: fetched once per container and
 * cached for its life; `refresh()` (called by the pipeline after `28P01`, i.e. the password was
 * rotated under a live container) makes the next `settings()` fetch the current version. A
 * failed fetch is not cached, so the next batch tries again.
 */
export function secretDatabaseSource(options: SecretDatabaseSourceOptions): DatabaseSource {
  const fetchSecret = options.fetchSecret ?? fetchWithPowertools;
  let cached: Promise<DatabaseSettings> | undefined;
  let forceFetch = false;

  const load = async (): Promise<DatabaseSettings> => {
    const raw = await fetchSecret(options.secretId, { forceFetch });
    forceFetch = false;
    const parsed = databaseSecret.safeParse(raw);
    if (!parsed.success) {
      // Never echo the value: it holds a password.
      const fields = parsed.error.issues.map((issue) => issue.path.join('.') || '(root)').join(', ');
      throw new ConfigurationError(`database secret ${options.secretId} is not usable: check ${fields}`);
    }
    return { ...options.base, connectionString: connectionStringWithSecret(options.base.connectionString, parsed.data) };
  };

  return {
    settings: () => {
      cached ??= load().catch((error: unknown) => {
        cached = undefined;
        throw error;
      });
      return cached;
    },
    refresh: async () => {
      cached = undefined;
      forceFetch = true;
    },
  };
}

/**
 * The Lambda functions' database source: Secrets Manager when `STORAGE_DB_SECRET_ID` is set
 * (every AWS stage), else `undefined`, which leaves the pipeline on `DATABASE_URL` / `PG*`
 * (`sls invoke local`, tests).
 */
export function databaseSourceFromEnvironment(
  base: DatabaseSettings,
  env: Environment = process.env,
  fetchSecret?: SecretFetcher,
): DatabaseSource | undefined {
  // Unset locally, where `DATABASE_URL` is used.
  const secretId = loadSetting(env, STORAGE_DB_SECRET_ID);
  return secretId === undefined ? undefined : secretDatabaseSource({ secretId, base, fetchSecret });
}
