import pg from 'pg';
import { connectionConfig, createPool } from '../shared/db.js';
import type { CoreLogger } from '../shared/logger.js';
import { loadConsumerSettings } from '../config/pipeline-settings.js';
import type { ConsumerSettings } from '../config/pipeline-settings.js';
import type { DatabaseSettings } from '../shared/settings.js';
import type { CliIo } from './command.js';

/**
 * The commands' logger: warnings and errors (e.g. a transient database error during a
 * re-drive) as JSON lines on stderr, so stdout stays the command's own output. The lines have
 * the shape of the service's own (Powertools) log lines: upper-case level, message, timestamp,
 * service, plus `component: "cli"`, so one log query reads both.
 */
export function cliLogger(io: CliIo): CoreLogger {
  const line =
    (level: 'WARN' | 'ERROR') =>
    (message: string, ...extra: Array<Record<string, unknown>>) =>
      io.stderr(cliLogLine(level, message, Object.assign({}, ...extra)));
  return { debug: () => undefined, info: () => undefined, warn: line('WARN'), error: line('ERROR') };
}

/** One line of {@link cliLogger}'s shape, newline-terminated. */
export function cliLogLine(level: string, message: string, extra?: object): string {
  const timestamp = new Date().toISOString();
  return `${JSON.stringify({ level, message, timestamp, service: 'storage-consumer', component: 'cli', ...extra })}\n`;
}

/** The settings and one small pool on the service's database, for the length of a command. */
export interface DatabaseContext {
  readonly settings: ConsumerSettings;
  readonly pool: pg.Pool;
  readonly logger: CoreLogger;
}

/**
 * Runs `work` with the settings read from the environment and a pool on the database they name
 * (`DATABASE_URL` or PG*, with the service's timeouts and UTC sessions); the pool is always ended.
 */
export async function withDatabase<T>(io: CliIo, work: (context: DatabaseContext) => Promise<T>): Promise<T> {
  const settings = loadConsumerSettings(io.env);
  const logger = cliLogger(io);
  const pool = createCliPool(settings.database, logger, 'cli');
  try {
    return await work({ settings, pool, logger });
  } finally {
    await pool.end();
  }
}

/** How often a CLI session's backend checks, during a long statement, that the client is still there (PostgreSQL 14+). */
const CLIENT_CHECK_INTERVAL_MS = 1_000;

/**
 * The session settings of every CLI connection, in one round trip: the statement timeout
 * (`STORAGE_DB_STATEMENT_TIMEOUT_MS`), so a query that waits on a lock is cancelled by the
 * server, not left behind when the client gives up; and, on PostgreSQL 14+, a check of the
 * client's socket during a statement, so a command stopped with Ctrl-C leaves no backend waiting
 * either. Sent as a query, not as startup parameters: a pooler refuses those. Behind PgBouncer
 * in transaction mode the setting stays on the server connection the pooler hands out next: the
 * service's batches set their own (`SET LOCAL`, shared/connection.ts), so only other sessions
 * without one of their own would inherit the CLI's statement timeout.
 */
function sessionSettingsQuery(database: DatabaseSettings): pg.QueryConfig {
  return {
    text:
      "SELECT set_config('statement_timeout', $1, false), CASE WHEN current_setting('server_version_num')::int >= 140000 " +
      "THEN set_config('client_connection_check_interval', $2, false) END",
    values: [String(Math.trunc(database.statementTimeoutMs)), String(CLIENT_CHECK_INTERVAL_MS)],
  };
}

interface RunningQueryHolder {
  readonly activeQuery?: unknown;
}

/**
 * Asks the server to cancel what `client` is still running (the PostgreSQL cancel request, which
 * poolers pass on), from a connection of its own. Best effort: a server that does not answer at
 * all cannot be asked, and its statement timeout ends the statement.
 */
function cancelRunningQuery(database: DatabaseSettings, client: pg.PoolClient): void {
  const running = (client as unknown as RunningQueryHolder).activeQuery;
  if (running === undefined || running === null) return;
  const canceller = new pg.Client(connectionConfig(database)) as unknown as {
    cancel(target: pg.PoolClient, query: unknown): void;
    readonly connection: { on(event: 'error', listener: () => void): void };
  };
  canceller.connection.on('error', () => undefined);
  canceller.cancel(client, running);
}

/**
 * A pool for one CLI command: the service's pool settings (connect timeout, keepalive, TLS,
 * client-side query timeout) plus {@link sessionSettingsQuery} on every new connection, and a
 * server-side cancel of the statement a connection still runs when it is given up (its client
 * timed out): a command that fails leaves no query behind on the server.
 */
export function createCliPool(database: DatabaseSettings, logger: CoreLogger, name: string): pg.Pool {
  const pool = createPool(database, logger, name);
  pool.on('connect', (client) => {
    // Queued before the command's first query on this connection: the client sends in order.
    client.query(sessionSettingsQuery(database)).catch(() => undefined);
  });
  pool.on('release', (error: Error | null | undefined, client: pg.PoolClient) => {
    // pg-pool passes null for a pool.query() that succeeded.
    if (error !== undefined && error !== null) cancelRunningQuery(database, client);
  });
  return pool;
}
