/**
 * Database credentials from AWS Secrets Manager, plugged into the pipeline as a `DatabaseSource`.
 * Lives outside `shared/` because it needs the AWS SDK; the core only sees the interface.
 */
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { z } from 'zod';
import type { Environment } from '../shared/env.js';
import { loadSetting } from '../shared/setting.js';
import { STORAGE_DB_SECRET_ID } from '../shared/setting-declarations.js';
import { ConfigurationError, StorageConsumerError } from '../shared/errors.js';
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

/**
 * Reads a secret's value; `forceFetch` bypasses any cache (after a rotation); `signal`, when
 * given, abandons the read (the migration's deadline).
 */
export type SecretFetcher = (
  secretId: string,
  options: { readonly forceFetch: boolean; readonly signal?: AbortSignal },
) => Promise<unknown>;

/**
 * The Secrets Manager client's bounds. The SDK's HTTP handler has no connect or request timeout
 * of its own, and a request timeout only warns unless told to throw: an endpoint that accepts TCP
 * and never answers (a security group or a VPC endpoint policy gone wrong) would hold a read for
 * as long as the function lives. Two attempts of at most 3 s + 5 s each keep a cold container's
 * first batch well inside its timeout.
 */
export const SECRETS_CLIENT_BOUNDS = { connectionTimeoutMs: 3_000, requestTimeoutMs: 5_000, maxAttempts: 2 } as const;

/**
 * GetSecretValue through the AWS SDK, with the bounds above and the caller's abort signal passed
 * down to the request. No cache here: {@link secretDatabaseSource} keeps the value.
 */
function sdkSecretFetcher(): SecretFetcher {
  let client: SecretsManagerClient | undefined;
  return async (secretId, { signal }) => {
    client ??= new SecretsManagerClient({
      maxAttempts: SECRETS_CLIENT_BOUNDS.maxAttempts,
      requestHandler: {
        connectionTimeout: SECRETS_CLIENT_BOUNDS.connectionTimeoutMs,
        requestTimeout: SECRETS_CLIENT_BOUNDS.requestTimeoutMs,
        // Without it, smithy's handler only logs a warning when the request timeout passes and
        // keeps waiting.
        throwOnRequestTimeout: true,
      },
    });
    const output = await client.send(new GetSecretValueCommand({ SecretId: secretId }), signal ? { abortSignal: signal } : {});
    if (output.SecretString === undefined) {
      throw new ConfigurationError(`database secret ${secretId} has no SecretString: store it as JSON text`);
    }
    try {
      return JSON.parse(output.SecretString) as unknown;
    } catch {
      // Never echo the value: it holds a password.
      throw new ConfigurationError(`database secret ${secretId} is not JSON: store username and password as a JSON object`);
    }
  };
}

/** Options of `secretDatabaseSource`. */
export interface SecretDatabaseSourceOptions {
  readonly secretId: string;
  /** Timeouts, pool size, TLS, and the endpoint when the secret names none (`DATABASE_URL`). */
  readonly base: DatabaseSettings;
  readonly fetchSecret?: SecretFetcher;
}

/**
 * A secret read that failed or was abandoned at the caller's deadline; the message names the
 * secret. The cause's `code` is kept (an SDK timeout is `ETIMEDOUT`), so a consumer's retry policy
 * (shared/error-classification.ts) sees the same error class as before.
 */
class SecretReadError extends StorageConsumerError {
  readonly code: string | undefined;
  constructor(message: string, cause: unknown) {
    super(message, { cause });
    this.name = 'SecretReadError';
    const code = typeof cause === 'object' && cause !== null && 'code' in cause ? cause.code : undefined;
    this.code = typeof code === 'string' ? code : undefined;
  }
}

/** What a failed read says: abandoned at the deadline (with its reason), or the SDK's error. */
function secretReadError(secretId: string, error: unknown, signal: AbortSignal | undefined): unknown {
  if (error instanceof ConfigurationError) return error; // already names the secret
  const why = (reason: unknown) => (reason instanceof Error ? reason.message : String(reason));
  if (signal?.aborted) {
    return new SecretReadError(
      `reading the database secret ${secretId} from Secrets Manager did not finish: ${why(signal.reason)}`,
      signal.reason,
    );
  }
  return new SecretReadError(`reading the database secret ${secretId} from Secrets Manager failed: ${why(error)}`, error);
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
  const fetchSecret = options.fetchSecret ?? sdkSecretFetcher();
  let cached: Promise<DatabaseSettings> | undefined;
  let forceFetch = false;

  const load = async (signal: AbortSignal | undefined): Promise<DatabaseSettings> => {
    const raw = await fetchSecret(options.secretId, signal ? { forceFetch, signal } : { forceFetch });
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
    settings: ({ signal } = {}) => {
      cached ??= load(signal).catch((error: unknown) => {
        cached = undefined;
        // The SDK rejects an aborted request with its own AbortError; the deadline's reason says more.
        throw secretReadError(options.secretId, error, signal);
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
