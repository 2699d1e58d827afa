/**
 * The settings the handlers' core needs on every runtime, Lambda included. Pipelines' Kafka
 * side (topics, groups, batch sizes, the host's selection) is the host's and the CLI's alone:
 * config/pipeline-settings.ts.
 */
import { deepFreeze } from './env.js';
import type { Environment } from './env.js';
import { loadWith } from './setting.js';
import type { SettingsReader } from './setting.js';
import {
  DATABASE_URL,
  STORAGE_APP_CACHE_TTL_S,
  STORAGE_DB_CONNECT_TIMEOUT_MS,
  STORAGE_DB_POOL_MAX,
  STORAGE_DB_PREPARED_STATEMENTS,
  STORAGE_DB_RETRY_ATTEMPTS,
  STORAGE_DB_RETRY_BASE_MS,
  STORAGE_DB_SSL,
  STORAGE_DB_STATEMENT_TIMEOUT_MS,
  STORAGE_FAILURE_RESPONSE,
  STORAGE_MIGRATION_LOCK_TIMEOUT_MS,
  STORAGE_REJECTION_LOG_LIMIT,
} from './setting-declarations.js';
import type { DbSslMode, FailureResponse } from './setting-declarations.js';

/** How to reach PostgreSQL. `connectionString` unset means the standard PG* variables. */
export interface DatabaseSettings {
  readonly connectionString: string | undefined;
  readonly connectTimeoutMs: number;
  readonly statementTimeoutMs: number;
  /** Connections per pipeline pool. */
  readonly poolMax: number;
  /** TLS: `PGSSLMODE` style; `undefined` leaves it to the connection string / PG* variables. */
  readonly ssl: DbSslMode | undefined;
  /**
   * Send the upserts as named statements, parsed and planned once per connection
   * (`STORAGE_DB_PREPARED_STATEMENTS`, default off). Only for a direct connection or a
   * session-pooling pooler: a transaction-pooling pooler (PgBouncer before 1.21 in transaction
   * mode) hands the next transaction another server connection, where the name does not exist.
   */
  readonly preparedStatements: boolean;
  /**
   * How long a migration runner waits for a lock (another runner's advisory lock, or a table
   * lock its DDL needs) before it gives up. Migrations have no statement timeout of their own.
   */
  readonly migrationLockTimeoutMs: number;
}

/** Transient-error retry policy (docs/design.md section 4). */
export interface RetrySettings {
  /** Retries after the first attempt. */
  readonly retries: number;
  /** First back-off; doubles each time (1, 2, 4, 8, 16 s by default). */
  readonly baseMs: number;
}

/** Everything the shared pipeline needs, validated once and frozen. */
export interface Settings {
  readonly database: DatabaseSettings;
  readonly retry: RetrySettings;
  readonly applicationCacheTtlMs: number;
  readonly failureResponse: FailureResponse;
  /** Rejections logged one by one per batch before the rest are grouped by reason. */
  readonly rejectionLogLimit: number;
}

/** Reads the shared settings through `reader` (which keeps every problem); unfrozen, for loaders that compose it. */
export function readSettings(reader: SettingsReader): Settings {
  return {
    database: {
      connectionString: reader.read(DATABASE_URL),
      connectTimeoutMs: reader.read(STORAGE_DB_CONNECT_TIMEOUT_MS),
      statementTimeoutMs: reader.read(STORAGE_DB_STATEMENT_TIMEOUT_MS),
      poolMax: reader.read(STORAGE_DB_POOL_MAX),
      ssl: reader.read(STORAGE_DB_SSL),
      preparedStatements: reader.read(STORAGE_DB_PREPARED_STATEMENTS),
      migrationLockTimeoutMs: reader.read(STORAGE_MIGRATION_LOCK_TIMEOUT_MS),
    },
    retry: {
      retries: reader.read(STORAGE_DB_RETRY_ATTEMPTS),
      baseMs: reader.read(STORAGE_DB_RETRY_BASE_MS),
    },
    applicationCacheTtlMs: reader.read(STORAGE_APP_CACHE_TTL_S) * 1000,
    failureResponse: reader.read(STORAGE_FAILURE_RESPONSE),
    rejectionLogLimit: reader.read(STORAGE_REJECTION_LOG_LIMIT),
  };
}

/**
 * Reads and validates the shared settings from the environment. Bad values throw one
 * ConfigurationError naming every invalid variable, at start-up rather than inside a batch.
 */
export function loadSettings(env: Environment = process.env): Settings {
  return deepFreeze(loadWith(env, readSettings));
}
