/**
 * The settings the handlers' core reads on every runtime (Lambda, the host, the CLI), and the few
 * only some runtimes read beside them (the Secrets Manager secret, the migrations folder,
 * Powertools' log level and metrics namespace, the audit actor). The host's and the CLI's own are
 * in config/setting-declarations.ts; both together are the catalog (`ALL_SETTINGS` there).
 */
import { z } from 'zod';
import { booleanVariable, integerVariable, millisecondsVariable } from './env.js';
import { DEFAULT_LOCK_TIMEOUT_MS } from './migrations/constants.js';
import { setting } from './setting.js';

/** How a batch that could not be stored is handed back for redelivery (docs/design.md section 3). */
export const FAILURE_RESPONSES = ['throw', 'report'] as const;
export type FailureResponse = (typeof FAILURE_RESPONSES)[number];

/** The TLS modes of `STORAGE_DB_SSL`, `PGSSLMODE` style. */
export const DB_SSL_MODES = ['disable', 'require', 'verify-full'] as const;
export type DbSslMode = (typeof DB_SSL_MODES)[number];

const everywhere = ['lambda', 'host', 'cli'] as const;
const text = z.string().trim().min(1);

export const DATABASE_URL = setting({
  name: 'DATABASE_URL',
  schema: text,
  fallback: undefined as string | undefined,
  defaultText: 'the standard `PG*` variables',
  runtimes: everywhere,
  tier: 'common',
  area: 'database',
  description: 'PostgreSQL URL; unset: the standard `PG*` variables (`PGHOST`, `PGUSER`, `PGSSLMODE` ...)',
  secret: 'url-password',
});

export const STORAGE_DB_SECRET_ID = setting({
  name: 'STORAGE_DB_SECRET_ID',
  schema: text,
  fallback: undefined as string | undefined,
  defaultText: '– (`DATABASE_URL`)',
  runtimes: ['lambda'],
  tier: 'common',
  area: 'database',
  description:
    'a Secrets Manager secret (ARN or name) with the database `username` and `password`, re-read once after a rejected password ' +
    '(docs/deployment.md); the deployment sets it',
});

export const STORAGE_DB_SSL = setting({
  name: 'STORAGE_DB_SSL',
  schema: z.enum(DB_SSL_MODES, { error: 'must be disable, require or verify-full' }),
  fallback: undefined as DbSslMode | undefined,
  defaultText: 'from the URL',
  runtimes: everywhere,
  tier: 'common',
  area: 'database',
  description: 'TLS to PostgreSQL: `disable`, `require` or `verify-full`',
});

export const STORAGE_DB_CONNECT_TIMEOUT_MS = setting({
  name: 'STORAGE_DB_CONNECT_TIMEOUT_MS',
  schema: millisecondsVariable(100, 600_000),
  fallback: 5_000,
  unit: 'ms',
  runtimes: everywhere,
  tier: 'advanced',
  area: 'database',
  description: 'connect timeout of every connection (100 to 600000)',
});

export const STORAGE_DB_STATEMENT_TIMEOUT_MS = setting({
  name: 'STORAGE_DB_STATEMENT_TIMEOUT_MS',
  schema: millisecondsVariable(100, 3_600_000),
  fallback: 30_000,
  unit: 'ms',
  runtimes: everywhere,
  tier: 'advanced',
  area: 'database',
  description:
    'statement timeout of every batch, set inside its transaction with time zone UTC (works through PgBouncer and RDS Proxy); ' +
    'the client gives up on a query 1 s later',
});

export const STORAGE_DB_PREPARED_STATEMENTS = setting({
  name: 'STORAGE_DB_PREPARED_STATEMENTS',
  schema: booleanVariable,
  fallback: false,
  runtimes: everywhere,
  tier: 'advanced',
  area: 'database',
  description:
    'send the upserts as named statements, prepared once per connection; only without a transaction-pooling pooler ' +
    '(docs/deployment.md, "Behind a connection pooler")',
});

export const STORAGE_DB_POOL_MAX = setting({
  name: 'STORAGE_DB_POOL_MAX',
  schema: integerVariable(1, 100, 'connections'),
  // On the host one connection per partition in flight: the topics have 3 partitions, and a
  // partition waiting for a connection is a partition not written (Lambda sets 1: serverless.yml).
  fallback: 3,
  unit: 'connections',
  runtimes: everywhere,
  tier: 'advanced',
  area: 'database',
  description:
    'connections per pipeline pool (one pool per pipeline; 1 to 100); on the host also how many partitions of a pipeline write at once: ' +
    "the default follows the topics' 3 partitions",
});

export const STORAGE_MIGRATION_LOCK_TIMEOUT_MS = setting({
  name: 'STORAGE_MIGRATION_LOCK_TIMEOUT_MS',
  schema: millisecondsVariable(100, 86_400_000),
  fallback: DEFAULT_LOCK_TIMEOUT_MS,
  unit: 'ms',
  runtimes: everywhere,
  tier: 'advanced',
  area: 'database',
  description:
    "how long a migration runner waits for a lock (another runner's advisory lock, a table lock of its DDL); migrations have no " +
    'statement timeout',
});

export const STORAGE_MIGRATIONS_DIR = setting({
  name: 'STORAGE_MIGRATIONS_DIR',
  schema: text,
  fallback: undefined as string | undefined,
  defaultText: "the package's `migrations/`",
  runtimes: ['lambda', 'cli'],
  tier: 'advanced',
  area: 'database',
  description:
    'where the migration runner (`migrate` function, `storage-consumer migrate`) reads its SQL files; for tests and for a ' +
    'migrations folder shipped apart',
});

export const STORAGE_DB_RETRY_ATTEMPTS = setting({
  name: 'STORAGE_DB_RETRY_ATTEMPTS',
  schema: integerVariable(0, 20),
  fallback: 5,
  unit: 'retries',
  runtimes: everywhere,
  tier: 'advanced',
  area: 'database',
  description: 'retries after the first attempt on a transient database error (0 to 20)',
});

export const STORAGE_DB_RETRY_BASE_MS = setting({
  name: 'STORAGE_DB_RETRY_BASE_MS',
  schema: millisecondsVariable(1, 60_000),
  fallback: 1_000,
  unit: 'ms',
  runtimes: everywhere,
  tier: 'advanced',
  area: 'database',
  description:
    'first back-off; doubles (1, 2, 4, 8, 16 s), each wait jittered between half of that and all of it, ' +
    "never past the invocation's remaining time",
});

export const STORAGE_APP_CACHE_TTL_S = setting({
  name: 'STORAGE_APP_CACHE_TTL_S',
  schema: integerVariable(0, 86_400, 's'),
  fallback: 300,
  unit: 's',
  runtimes: everywhere,
  tier: 'advanced',
  area: 'database',
  description: 'application id cache, in SECONDS (the only setting not in ms; hits only, a miss is never cached; 0 turns it off)',
});

export const STORAGE_FAILURE_RESPONSE = setting({
  name: 'STORAGE_FAILURE_RESPONSE',
  schema: z.enum(FAILURE_RESPONSES, { error: 'must be throw or report' }),
  fallback: 'throw' as FailureResponse,
  runtimes: everywhere,
  tier: 'advanced',
  area: 'database',
  description:
    'how a batch that could not be stored is handed back: `throw` (function error) or `report` (partial batch response; only ' +
    'with ReportBatchItemFailures on the mapping; the deployment sets `report`)',
});

export const STORAGE_REJECTION_LOG_LIMIT = setting({
  name: 'STORAGE_REJECTION_LOG_LIMIT',
  schema: integerVariable(0, 1000),
  fallback: 5,
  unit: 'lines',
  runtimes: everywhere,
  tier: 'advanced',
  area: 'database',
  description: 'rejections per batch logged one by one; the rest in one line grouped by reason, with their partitions and offsets',
});

export const POWERTOOLS_LOG_LEVEL = setting({
  name: 'POWERTOOLS_LOG_LEVEL',
  schema: text,
  fallback: 'INFO',
  runtimes: ['lambda', 'host'],
  tier: 'advanced',
  area: 'operations',
  description:
    'level of the JSON log lines, read by Powertools Logger itself: `DEBUG`, `INFO`, `WARN`, `ERROR`, `SILENT`; the deployment ' +
    'sets `INFO`',
});

export const POWERTOOLS_METRICS_NAMESPACE = setting({
  name: 'POWERTOOLS_METRICS_NAMESPACE',
  schema: text,
  fallback: 'StorageConsumer',
  runtimes: ['lambda'],
  tier: 'advanced',
  area: 'operations',
  description: 'CloudWatch namespace of the batch metrics (EMF); the deployment sets `StorageConsumer/<stage>`, which the alarms watch',
});

export const STORAGE_ACTOR = setting({
  name: 'STORAGE_ACTOR',
  schema: text,
  fallback: undefined as string | undefined,
  defaultText: 'the OS `user@host`',
  runtimes: ['cli'],
  tier: 'advanced',
  area: 'operations',
  description: "who acts, as the audit trail (`operator_actions`) records it: a CI job's name, an operator's identity",
});

/** The settings of this file, in the reference's order within their area. */
export const SHARED_SETTINGS = [
  DATABASE_URL,
  STORAGE_DB_SECRET_ID,
  STORAGE_DB_SSL,
  STORAGE_DB_CONNECT_TIMEOUT_MS,
  STORAGE_DB_STATEMENT_TIMEOUT_MS,
  STORAGE_DB_PREPARED_STATEMENTS,
  STORAGE_DB_POOL_MAX,
  STORAGE_MIGRATION_LOCK_TIMEOUT_MS,
  STORAGE_MIGRATIONS_DIR,
  STORAGE_DB_RETRY_ATTEMPTS,
  STORAGE_DB_RETRY_BASE_MS,
  STORAGE_APP_CACHE_TTL_S,
  STORAGE_FAILURE_RESPONSE,
  STORAGE_REJECTION_LOG_LIMIT,
  POWERTOOLS_LOG_LEVEL,
  POWERTOOLS_METRICS_NAMESPACE,
  STORAGE_ACTOR,
] as const;
