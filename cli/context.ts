import type pg from 'pg';
import { createPool } from '../shared/db.js';
import type { CoreLogger } from '../shared/logger.js';
import { loadConsumerSettings } from '../host/pipeline-settings.js';
import type { ConsumerSettings } from '../host/pipeline-settings.js';
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
  const pool = createPool(settings.database, logger, 'cli');
  try {
    return await work({ settings, pool, logger });
  } finally {
    await pool.end();
  }
}
