import pg from 'pg';
import { parse } from 'pg-connection-string';
import type { DatabaseSettings } from './settings.js';

/** A logger shape the core needs; Powertools' Logger and console-like loggers both fit. */
export interface CoreLogger {
  debug(message: string, ...extra: Array<Record<string, unknown>>): void;
  info(message: string, ...extra: Array<Record<string, unknown>>): void;
  warn(message: string, ...extra: Array<Record<string, unknown>>): void;
  error(message: string, ...extra: Array<Record<string, unknown>>): void;
}

/**
 * Connection options for one pool or client: connect and statement timeouts, and the session
 * in time zone UTC (appended to any libpq `options` the connection string carries, so a
 * test's `search_path` survives).
 */
export function connectionConfig(settings: DatabaseSettings, overrides: Partial<pg.ClientConfig> = {}): pg.ClientConfig {
  const fromUrl = settings.connectionString ? parse(settings.connectionString) : {};
  const { options: urlOptions, ...rest } = fromUrl as pg.ClientConfig & { options?: string };
  const config: pg.ClientConfig = {
    ...(rest as pg.ClientConfig),
    connectionTimeoutMillis: settings.connectTimeoutMs,
    statement_timeout: settings.statementTimeoutMs,
    options: [urlOptions, '-c TimeZone=UTC'].filter(Boolean).join(' '),
    ...overrides,
  };
  if (settings.ssl === 'disable') config.ssl = false;
  if (settings.ssl === 'require') config.ssl = { rejectUnauthorized: false };
  if (settings.ssl === 'verify-full') config.ssl = { rejectUnauthorized: true };
  return config;
}

/**
 * One small pool per pipeline, so a reviews flood can never take network-metrics'
 * connections. Idle-client errors (a server restart) are logged, never crash the process:
 * the next checkout gets a fresh connection.
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
    idleTimeoutMillis: 60_000,
    application_name: `storage-consumer/${name}`,
    ...overrides,
  });
  pool.on('error', (error) => {
    logger.warn('idle database connection failed; it will be replaced', { pool: name, error: String(error) });
  });
  return pool;
}
