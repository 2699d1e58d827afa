import { z } from 'zod';
import { booleanVariable, deepFreeze, integerVariable, listVariable, readVariable } from './env.js';
import type { Environment } from './env.js';
import { ConfigurationError } from './errors.js';
import { DEFAULT_LOCK_TIMEOUT_MS } from './migrations/constants.js';
import { envSuffix } from './pipeline-spec.js';
import { isPipelineName, PIPELINE_NAMES, PIPELINES } from './pipelines.js';
import type { PipelineName } from './pipelines.js';

/** How a batch that could not be stored is handed back for redelivery (docs/design.md section 3). */
export const FAILURE_RESPONSES = ['throw', 'report'] as const;
export type FailureResponse = (typeof FAILURE_RESPONSES)[number];

/** One pipeline's own settings. */
export interface PipelineSettings {
  readonly name: PipelineName;
  readonly topic: string;
  readonly group: string;
  /** Records per event (Lambda: the mapping's BatchSize; host: what it cuts batches to). */
  readonly batchSize: number;
}

/** How to reach PostgreSQL. `connectionString` unset means the standard PG* variables. */
export interface DatabaseSettings {
  readonly connectionString: string | undefined;
  readonly connectTimeoutMs: number;
  readonly statementTimeoutMs: number;
  /** Connections per pipeline pool. */
  readonly poolMax: number;
  /** TLS: `PGSSLMODE` style; `undefined` leaves it to the connection string / PG* variables. */
  readonly ssl: 'disable' | 'require' | 'verify-full' | undefined;
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
  readonly pipelines: Readonly<Record<PipelineName, PipelineSettings>>;
  /** Pipelines a host process runs (`STORAGE_PIPELINES`); all of them by default. */
  readonly selectedPipelines: readonly PipelineName[];
  readonly database: DatabaseSettings;
  readonly retry: RetrySettings;
  readonly applicationCacheTtlMs: number;
  readonly failureResponse: FailureResponse;
  /** Rejections logged one by one per batch before the rest are grouped by reason. */
  readonly rejectionLogLimit: number;
}

const MAX_BATCH_SIZE = 10_000; // the largest BatchSize an event source mapping accepts

function readPipeline(env: Environment, name: PipelineName): PipelineSettings {
  const suffix = envSuffix(name);
  const defaults = PIPELINES[name];
  const generalBatch = readVariable(env, 'STORAGE_MAX_POLL_RECORDS', integerVariable(1, MAX_BATCH_SIZE), defaults.batchSize);
  return {
    name,
    topic: readVariable(env, `STORAGE_TOPIC_${suffix}`, z.string().trim().min(1), defaults.topic),
    group: readVariable(env, `STORAGE_GROUP_${suffix}`, z.string().trim().min(1), defaults.group),
    batchSize: readVariable(env, `STORAGE_MAX_POLL_RECORDS_${suffix}`, integerVariable(1, MAX_BATCH_SIZE), generalBatch),
  };
}

function readSelectedPipelines(env: Environment): PipelineName[] {
  const names = readVariable(env, 'STORAGE_PIPELINES', listVariable, [...PIPELINE_NAMES]);
  const unknown = names.filter((name) => !isPipelineName(name));
  if (unknown.length > 0) {
    throw new ConfigurationError(`STORAGE_PIPELINES names unknown pipeline(s) ${unknown.join(', ')}; known: ${PIPELINE_NAMES.join(', ')}`);
  }
  if (names.length === 0) throw new ConfigurationError('STORAGE_PIPELINES selects no pipeline');
  return [...new Set(names.filter(isPipelineName))];
}

/**
 * Reads and validates the settings from the environment. A bad value throws a
 * ConfigurationError naming the variable, at start-up rather than inside a batch.
 */
export function loadSettings(env: Environment = process.env): Settings {
  const pipelines = Object.fromEntries(PIPELINE_NAMES.map((name) => [name, readPipeline(env, name)])) as Record<
    PipelineName,
    PipelineSettings
  >;
  const settings: Settings = {
    pipelines,
    selectedPipelines: readSelectedPipelines(env),
    database: {
      connectionString: readVariable(env, 'DATABASE_URL', z.string().trim().min(1), undefined as string | undefined),
      connectTimeoutMs: readVariable(env, 'STORAGE_DB_CONNECT_TIMEOUT_MS', integerVariable(100, 600_000), 5_000),
      statementTimeoutMs: readVariable(env, 'STORAGE_DB_STATEMENT_TIMEOUT_MS', integerVariable(100, 3_600_000), 30_000),
      poolMax: readVariable(env, 'STORAGE_DB_POOL_MAX', integerVariable(1, 100), 2),
      ssl: readVariable(
        env,
        'STORAGE_DB_SSL',
        z.enum(['disable', 'require', 'verify-full'], { error: 'must be disable, require or verify-full' }),
        undefined as DatabaseSettings['ssl'],
      ),
      preparedStatements: readVariable(env, 'STORAGE_DB_PREPARED_STATEMENTS', booleanVariable, false),
      migrationLockTimeoutMs: readVariable(
        env,
        'STORAGE_MIGRATION_LOCK_TIMEOUT_MS',
        integerVariable(100, 86_400_000),
        DEFAULT_LOCK_TIMEOUT_MS,
      ),
    },
    retry: {
      retries: readVariable(env, 'STORAGE_DB_RETRY_ATTEMPTS', integerVariable(0, 20), 5),
      baseMs: readVariable(env, 'STORAGE_DB_RETRY_BASE_MS', integerVariable(1, 60_000), 1_000),
    },
    applicationCacheTtlMs: readVariable(env, 'STORAGE_APP_CACHE_TTL_S', integerVariable(0, 86_400), 300) * 1000,
    failureResponse: readVariable(
      env,
      'STORAGE_FAILURE_RESPONSE',
      z.enum(FAILURE_RESPONSES, { error: 'must be throw or report' }),
      'throw' as FailureResponse,
    ),
    rejectionLogLimit: readVariable(env, 'STORAGE_REJECTION_LOG_LIMIT', integerVariable(0, 1000), 5),
  };
  return deepFreeze(settings);
}
