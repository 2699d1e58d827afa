import pg from 'pg';
import { connectFailure, connectionConfig, createPool } from '../shared/db.js';
import type { CoreLogger } from '../shared/logger.js';
import { redactErrorText } from '../shared/redaction.js';
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
  // Error text in the fields goes through the one redaction, as in the host's and the functions' log lines.
  return `${JSON.stringify({ level, message, timestamp, service: 'storage-consumer', component: 'cli', ...extra }, redactErrorText)}\n`;
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

/** What a pg client knows of its backend: enough to ask the server to cancel that backend's statement. */
interface BackendKey {
  readonly processID: number | null;
  readonly secretKey: number | null;
}

/** The protocol connection of a pg client, which sends the cancel request. */
interface CancelConnection {
  on(event: 'error', listener: () => void): void;
  on(event: 'connect', listener: () => void): void;
  connect(port: number | string, host: string): void;
  cancel(processID: number, secretKey: number): void;
}

/**
 * Asks the server to cancel what `client`'s backend still runs (the PostgreSQL cancel request,
 * which poolers pass on), from a connection of its own. Sent on every release with an error (a
 * client-side timeout leaves the statement running); a backend that runs nothing ignores it.
 * Best effort: a server that does not answer at all cannot be asked, and its statement timeout
 * ends the statement. Done here rather than with pg's `Client.cancel`, which reads the
 * deprecated `Client.activeQuery` (a DeprecationWarning on every command).
 */
function cancelRunningQuery(database: DatabaseSettings, client: pg.PoolClient): void {
  const { processID, secretKey } = client as unknown as BackendKey;
  if (processID === null || secretKey === null || processID === undefined || secretKey === undefined) return;
  const canceller = new pg.Client(connectionConfig(database)) as unknown as {
    readonly host: string;
    readonly port: number;
    readonly connection: CancelConnection;
  };
  const connection = canceller.connection;
  connection.on('error', () => undefined);
  connection.on('connect', () => connection.cancel(processID, secretKey));
  // A Unix socket folder (`host=/var/run/postgresql`) is reached through its socket file, as pg does.
  if (canceller.host.startsWith('/')) connection.connect(`${canceller.host}/.s.PGSQL.${canceller.port}`, canceller.host);
  else connection.connect(canceller.port, canceller.host);
}

/**
 * Makes every failed checkout of `pool` (its `pool.query` included, which checks out through
 * `connect`) say where it tried to connect and what bounded the wait (shared/db.ts
 * `connectFailure`), so an unreachable database is not a bare `timeout expired`.
 */
function describeConnectFailures(pool: pg.Pool, config: pg.ClientConfig): void {
  type Checkout = (callback?: (error: Error | undefined, client?: pg.PoolClient, done?: (release?: unknown) => void) => void) => unknown;
  const checkout = (pool.connect as unknown as Checkout).bind(pool);
  const described = (error: unknown) => connectFailure(error, config) as Error;
  const connect: Checkout = (callback) => {
    if (callback !== undefined)
      return checkout((error, client, done) => callback(error === undefined || error === null ? error : described(error), client, done));
    return (checkout() as Promise<pg.PoolClient>).catch((error: unknown) => {
      throw described(error);
    });
  };
  (pool as unknown as { connect: Checkout }).connect = connect;
}

/**
 * A pool for one CLI command: the service's pool settings (connect timeout, keepalive, TLS,
 * client-side query timeout) plus {@link sessionSettingsQuery} on every new connection, awaited
 * before the connection is handed out, and a server-side cancel of the statement a connection
 * still runs when it is given up (its client timed out): a command that fails leaves no query
 * behind on the server. A clean release passes no error (pg-pool passes `null`, not `undefined`).
 */
export function createCliPool(database: DatabaseSettings, logger: CoreLogger, name: string): pg.Pool {
  const pool = createPool(database, logger, name, {
    onConnect: async (client: pg.ClientBase) => {
      await client.query(sessionSettingsQuery(database));
    },
  });
  pool.on('release', (error: Error | null | undefined, client: pg.PoolClient) => {
    // pg-pool passes null for a pool.query() that succeeded.
    if (error instanceof Error) cancelRunningQuery(database, client);
  });
  describeConnectFailures(pool, connectionConfig(database));
  return pool;
}
