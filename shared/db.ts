import pg from 'pg';
import { parse } from 'pg-connection-string';
import { queryTimeoutMs } from './connection.js';
import type { DatabaseSettings } from './settings.js';

/** A logger shape the core needs; Powertools' Logger and console-like loggers both fit. */
export interface CoreLogger {
  debug(message: string, ...extra: Array<Record<string, unknown>>): void;
  info(message: string, ...extra: Array<Record<string, unknown>>): void;
  warn(message: string, ...extra: Array<Record<string, unknown>>): void;
  error(message: string, ...extra: Array<Record<string, unknown>>): void;
}

/** How long a connection stays silent before TCP starts probing whether its peer is still there. */
export const KEEPALIVE_INITIAL_DELAY_MS = 10_000;

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

const QUOTE_OR_BACKSLASH = /["\\]/;

/**
 * `values` as the PostgreSQL array literal node-postgres itself sends for the array (every element
 * double-quoted, `"` and `\\` escaped, `NULL` unquoted: byte for byte what `pg`'s `prepareValue`
 * makes of it), or `values` unchanged when an element is anything but a string, number,
 * boolean, bigint or null (the driver serialises those). Built here because the driver runs two
 * regex replacements on every element, where a string without a quote or backslash needs none:
 * the unnest upserts send 14 such arrays of 500 elements per batch.
 */
export function arrayLiteral(values: readonly unknown[]): string | readonly unknown[] {
  let literal = '{';
  for (let i = 0; i < values.length; i += 1) {
    if (i > 0) literal += ',';
    const value = values[i];
    if (value === null || value === undefined) literal += 'NULL';
    else if (typeof value === 'string') {
      literal += QUOTE_OR_BACKSLASH.test(value) ? `"${value.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"` : `"${value}"`;
    } else if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') literal += `"${String(value)}"`;
    else return values;
  }
  return `${literal}}`;
}

function withArrayLiterals(value: unknown): unknown {
  return Array.isArray(value) ? arrayLiteral(value) : value;
}

function isStatementWithValues(value: unknown): value is { values: unknown[] } {
  return typeof value === 'object' && value !== null && 'text' in value && 'values' in value && Array.isArray(value.values);
}

/**
 * The pool's client: `query(text, values)` and `query({ name, text, values })` send array
 * parameters as `arrayLiteral` text, the same text the driver would make of them, only cheaper.
 * Every other form of `query` is the driver's own.
 */
export class ArrayLiteralClient extends pg.Client {
  // Overrides all of pg.Client's overloads; only `(text, values, ...)` is touched.
  override query(...args: unknown[]): never {
    if (typeof args[0] === 'string' && Array.isArray(args[1])) args[1] = args[1].map(withArrayLiterals);
    else if (isStatementWithValues(args[0])) args[0] = { ...args[0], values: args[0].values.map(withArrayLiterals) };
    return (pg.Client.prototype.query as (...args: unknown[]) => never).apply(this, args);
  }
}

/**
 * One small pool per pipeline, so a reviews flood can never take network-metrics'
 * connections. Every query has a client-side timeout a little above the statement timeout
 * (a connection that stops answering fails instead of hanging). Idle-client errors (a server
 * restart) are logged, never crash the process: the next checkout gets a fresh connection.
 */
export function createPool(
  settings: DatabaseSettings,
  logger: CoreLogger,
  name: string,
  overrides: Partial<pg.PoolConfig> = {},
): pg.Pool {
  const pool = new pg.Pool({
    ...connectionConfig(settings),
    max: settings.poolMax,
    query_timeout: queryTimeoutMs(settings),
    Client: ArrayLiteralClient,
    idleTimeoutMillis: 60_000,
    application_name: `storage-consumer/${name}`,
    ...overrides,
  });
  pool.on('error', (error) => {
    logger.warn('idle database connection failed; it will be replaced', { pool: name, error: String(error) });
  });
  return pool;
}
