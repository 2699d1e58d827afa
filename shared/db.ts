/**
 * How the service connects to PostgreSQL: the client options every connection shares (connect
 * timeout, TCP keepalive, TLS, no startup parameters of its own) and the one small pool per
 * pipeline. Used by the batch runtime (runtime.ts), the CLI (cli/context.ts), the host's pause
 * control and, through migrations/connection.ts, the migration runner.
 */
import pg from 'pg';
import { parse } from 'pg-connection-string';
import { queryTimeoutMs } from './connection.js';
import type { CoreLogger } from './logger.js';
import type { DatabaseSettings } from './settings.js';
import { loggedError } from './errors.js';

/** How long a connection stays silent before TCP starts probing whether its peer is still there. */
const KEEPALIVE_INITIAL_DELAY_MS = 10_000;

/**
 * Connection options for one pool or client: the connect timeout, TCP keepalive (a peer that
 * vanished without a FIN, e.g. after a failover or behind a NAT that forgot the flow, is
 * noticed instead of waited on forever) and TLS. No session settings travel as startup
 * parameters: a pooler (PgBouncer in transaction mode) refuses them, RDS Proxy pins the session
 * on them. The batch transaction sets its timeouts and time zone itself
 * (`beginBatchTransaction`); libpq `options` a connection string carries pass through untouched
 * (a test's `search_path`; a pooler refuses them with a clear message).
 */
export function connectionConfig(settings: DatabaseSettings, overrides: Partial<pg.ClientConfig> = {}): pg.ClientConfig {
  const fromUrl = settings.connectionString ? parse(settings.connectionString) : {};
  const config: pg.ClientConfig = {
    ...(fromUrl as pg.ClientConfig),
    connectionTimeoutMillis: settings.connectTimeoutMs,
    keepAlive: true,
    keepAliveInitialDelayMillis: KEEPALIVE_INITIAL_DELAY_MS,
    ...overrides,
  };
  if (settings.ssl === 'disable') config.ssl = false;
  if (settings.ssl === 'require') config.ssl = { rejectUnauthorized: false };
  if (settings.ssl === 'verify-full') config.ssl = { rejectUnauthorized: true };
  return config;
}

/**
 * One small pool per pipeline, so a reviews flood can never take network-metrics'
 * connections. Every query has a client-side timeout a little above the statement timeout
 * (a connection that stops answering fails instead of hanging). Idle-client errors (a server
 * restart) are logged, never crash the process: the next checkout gets a fresh connection.
 */
export function createPool(settings: DatabaseSettings, logger: CoreLogger, name: string, overrides: Partial<pg.PoolConfig> = {}): pg.Pool {
  const pool = new pg.Pool({
    ...connectionConfig(settings),
    max: settings.poolMax,
    query_timeout: queryTimeoutMs(settings),
    idleTimeoutMillis: 60_000,
    application_name: `storage-consumer/${name}`,
    ...overrides,
  });
  pool.on('error', (error) => {
    logger.warn('idle database connection failed; it will be replaced', { pool: name, ...loggedError(error) });
  });
  return pool;
}

/** Where a pg configuration connects, as pg itself resolves it (connection string, PG* variables, defaults): `host:port`. */
function databaseAddress(config: pg.ClientConfig): string {
  // Constructing a client only reads the configuration; it connects nothing.
  const { host, port } = new pg.Client(config) as unknown as { readonly host: string; readonly port: number };
  return `${host}:${port}`;
}

/**
 * A failed connect in words an operator acts on: the step (connecting), the address (the one
 * redaction turns it into `<address>` wherever the line is shown) and, for a timeout, the setting
 * that bounds the wait, instead of pg's bare `timeout expired`. A plain `Error` with the driver's
 * error as `cause` and its `code` and message kept, so classification (transient or not) reads
 * it as before. The server's own answers (pg.DatabaseError: a wrong password, a missing
 * database) name their cause and are returned as they are.
 */
export function connectFailure(error: unknown, config: pg.ClientConfig): unknown {
  if (!(error instanceof Error) || error instanceof pg.DatabaseError) return error;
  const code = (error as { code?: unknown }).code;
  const inner =
    error instanceof AggregateError ? error.errors.map((one: unknown) => (one instanceof Error ? one.message : String(one))) : [];
  const text = error.message || inner.join('; ') || (typeof code === 'string' ? code : error.name);
  const timedOut = /timeout expired|connection timeout/i.test(text);
  const bound =
    timedOut && config.connectionTimeoutMillis !== undefined
      ? ` (no answer within STORAGE_DB_CONNECT_TIMEOUT_MS=${config.connectionTimeoutMillis} ms)`
      : '';
  const described = new Error(`connecting to PostgreSQL at ${databaseAddress(config)} failed: ${text}${bound}`, { cause: error });
  if (typeof code === 'string') Object.assign(described, { code });
  return described;
}
