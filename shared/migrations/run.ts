/**
 * The migration run (docs/design.md section 7), `runMigrations`, which every entry point calls: one
 * dedicated connection, the App API's table checked, the lock taken, each pending file applied with
 * its tracking row; a run stopped by its deadline ends its session for good (session.ts).
 */
import pg from 'pg';
import { connectFailure } from '../db.js';
import { MigrationError } from '../errors.js';
import { applyMigration } from './apply.js';
import { APPLICATIONS_TABLE, DEFAULT_CONNECT_TIMEOUT_MS, DEFAULT_LOCK_TIMEOUT_MS, DEFAULT_MIGRATIONS_DIRECTORY } from './constants.js';
import { loadMigrations } from './files.js';
import { withMigrationLock } from './lock.js';
import { endSession } from './session.js';
import { compareWithApplied, describeMismatches } from './status.js';
import { ensureTrackingTable, readAppliedMigrations } from './tracking.js';
import type { MigrationFile, MigrationLogger, MigrationReport } from './model.js';

/** Options of `runMigrations`. */
export interface RunMigrationsOptions {
  /**
   * How to reach the database (`migrationConnection` builds it from the settings). A connect
   * timeout is added when it sets none; the session's time zone and timeouts are set below.
   */
  readonly connection: pg.ClientConfig;
  /** Longest wait for a lock; default 10 minutes. */
  readonly lockTimeoutMs?: number;
  /** Longest single statement; default 0: none. */
  readonly statementTimeoutMs?: number;
  /** Directory of the `NNNN_name.sql` files; defaults to the repository's `migrations/`. */
  readonly directory?: string;
  /** Defaults to `console`. */
  readonly logger?: MigrationLogger;
  /**
   * A deadline: once aborted, the run stops for good before it settles (see `endSession`): the
   * running statement is cancelled, its transaction rolled back and the lock released; then it
   * rejects with a MigrationError carrying the abort reason.
   */
  readonly signal?: AbortSignal;
}

/**
 * Brings the schema up to date (docs/design.md section 7) on one dedicated connection: checks that the
 * App API's table exists, takes the migration lock, then applies each pending file in its own
 * transaction together with its tracking row. The lock is released and the connection ended
 * in any case.
 * @throws MigrationError on a bad migrations directory, a missing App API table, a changed
 *   applied file, a failing file (earlier files stay applied), a lock not obtained in time or
 *   the deadline. A failed connect names its address and bound (shared/db.ts `connectFailure`),
 *   keeping the driver's code; other connection errors keep their driver types.
 */
export async function runMigrations(options: RunMigrationsOptions): Promise<MigrationReport> {
  const logger = options.logger ?? console;
  const files = await loadMigrations(options.directory ?? DEFAULT_MIGRATIONS_DIRECTORY);
  const lockTimeoutMs = options.lockTimeoutMs ?? DEFAULT_LOCK_TIMEOUT_MS;
  const connection = {
    ...options.connection,
    connectionTimeoutMillis: options.connection.connectionTimeoutMillis ?? DEFAULT_CONNECT_TIMEOUT_MS,
  };
  const client = new pg.Client(connection);
  // An idle client that loses its server emits 'error'; unhandled, it would crash the process.
  client.on('error', (error) => logger.warn('migration connection failed', { error: error.message }));

  const { signal } = options;
  let pid: number | undefined;
  let ending: Promise<void> | undefined;
  const onDeadline = () => {
    ending ??= endSession(connection, client, pid);
  };
  signal?.addEventListener('abort', onDeadline, { once: true });
  try {
    return await (async () => {
      await client.connect().catch((error: unknown) => {
        throw connectFailure(error, connection);
      });
      try {
        signal?.throwIfAborted();
        const { rows } = await client.query<{ pid: number }>(
          `SELECT pg_backend_pid() AS pid, set_config('TimeZone', 'UTC', false),
                  set_config('statement_timeout', $1, false), set_config('lock_timeout', $2, false)`,
          [String(options.statementTimeoutMs ?? 0), String(lockTimeoutMs)],
        );
        pid = rows[0]?.pid;
        signal?.throwIfAborted();
        await assertApplicationsTableExists(client);
        return await withMigrationLock(client, { logger, lockTimeoutMs }, () => migrate(client, files, logger));
      } finally {
        await client.end().catch(() => undefined);
      }
    })();
  } catch (error) {
    if (signal?.aborted !== true) throw error;
    onDeadline();
    throw await deadlineError(signal, ending, error);
  } finally {
    signal?.removeEventListener('abort', onDeadline);
    // A run that finished while its deadline struck still waits for the session's end.
    await ending?.catch(() => undefined);
  }
}

/** The error a run stopped by its deadline rejects with, once its session is known to be gone (or not). */
async function deadlineError(signal: AbortSignal, ending: Promise<void> | undefined, cause: unknown): Promise<MigrationError> {
  const reason: unknown = signal.reason;
  const why = reason instanceof Error ? reason.message : String(reason);
  try {
    await ending;
  } catch (error) {
    return new MigrationError(
      `${why}; the migration session was closed, but its end could not be confirmed (${String(error)}): ` +
        'its statement timeout bounds what still runs, and no COMMIT can follow',
      { cause },
    );
  }
  return new MigrationError(`${why}: the running statement was cancelled, its transaction rolled back and the migration lock released`, {
    cause,
  });
}

async function assertApplicationsTableExists(client: pg.ClientBase): Promise<void> {
  const result = await client.query<{ table: string | null }>('SELECT to_regclass($1)::text AS table', [APPLICATIONS_TABLE]);
  if (!result.rows[0]?.table) {
    throw new MigrationError(`the App API's table ${APPLICATIONS_TABLE} is missing: run the App API's migrations first`);
  }
}

async function migrate(client: pg.ClientBase, files: readonly MigrationFile[], logger: MigrationLogger): Promise<MigrationReport> {
  await ensureTrackingTable(client);
  const status = compareWithApplied(files, await readAppliedMigrations(client));
  if (status.mismatches.length > 0) {
    throw new MigrationError(describeMismatches(status.mismatches));
  }
  if (status.unknownApplied.length > 0) {
    // A rolled-back deploy: the newer schema is expected to stay compatible with this code.
    logger.warn('the database has migrations newer than this code knows; accepting them', {
      unknown_versions: status.unknownApplied,
    });
  }
  const pending = new Set(status.pending);
  const applied: Array<{ version: number; name: string }> = [];
  for (const file of files.filter((candidate) => pending.has(candidate.version))) {
    const started = performance.now();
    await applyMigration(client, file);
    applied.push({ version: file.version, name: file.name });
    logger.info('applied migration', {
      version: file.version,
      file: file.fileName,
      duration_ms: Math.round(performance.now() - started),
    });
  }
  const report: MigrationReport = {
    applied,
    alreadyApplied: files.length - status.pending.length,
    unknownApplied: status.unknownApplied,
  };
  logger.info('migrations up to date', {
    applied: applied.length,
    already_applied: report.alreadyApplied,
    unknown_applied: report.unknownApplied,
  });
  return report;
}
