import pg from 'pg';
import { MigrationError } from '../errors.js';
import { applyMigration } from './apply.js';
import {
  APPLICATIONS_TABLE,
  DEFAULT_CONNECT_TIMEOUT_MS,
  DEFAULT_MIGRATIONS_DIRECTORY,
  DEFAULT_STATEMENT_TIMEOUT_MS,
} from './constants.js';
import { loadMigrations } from './files.js';
import { withMigrationLock } from './lock.js';
import { compareWithApplied, describeMismatches } from './status.js';
import { ensureTrackingTable, readAppliedMigrations } from './tracking.js';
import type { MigrationFile, MigrationLogger, MigrationReport } from './types.js';

/** Options of `runMigrations`. */
export interface RunMigrationsOptions {
  /**
   * How to reach the database. A connect timeout and a statement timeout are added when it sets
   * none; the session runs in time zone UTC.
   */
  readonly connection: pg.ClientConfig;
  /** Directory of the `NNNN_name.sql` files; defaults to the repository's `migrations/`. */
  readonly directory?: string;
  /** Defaults to `console`. */
  readonly logger?: MigrationLogger;
}

/**
 * Brings the schema up to date (SPEC section 7) on one dedicated connection: checks that the
 * App API's table exists, takes the migration lock, then applies each pending file in its own
 * transaction together with its tracking row. The lock is released and the connection ended
 * in any case.
 * @throws MigrationError on a bad migrations directory, a missing App API table, a changed
 *   applied file or a failing file (earlier files stay applied). Connection errors keep their
 *   driver types.
 */
export async function runMigrations(options: RunMigrationsOptions): Promise<MigrationReport> {
  const logger = options.logger ?? console;
  const files = await loadMigrations(options.directory ?? DEFAULT_MIGRATIONS_DIRECTORY);
  const client = new pg.Client({
    ...options.connection,
    connectionTimeoutMillis: options.connection.connectionTimeoutMillis ?? DEFAULT_CONNECT_TIMEOUT_MS,
    statement_timeout: options.connection.statement_timeout ?? DEFAULT_STATEMENT_TIMEOUT_MS,
  });
  // An idle client that loses its server emits 'error'; unhandled, it would crash the process.
  client.on('error', (error) => logger.warn('migration connection failed', { error: error.message }));
  await client.connect();
  try {
    await client.query("SET TIME ZONE 'UTC'");
    await assertApplicationsTableExists(client);
    return await withMigrationLock(client, logger, () => migrate(client, files, logger));
  } finally {
    await client.end().catch(() => undefined);
  }
}

async function assertApplicationsTableExists(client: pg.ClientBase): Promise<void> {
  const result = await client.query<{ table: string | null }>('SELECT to_regclass($1)::text AS table', [
    APPLICATIONS_TABLE,
  ]);
  if (!result.rows[0]?.table) {
    throw new MigrationError(
      `the App API's table ${APPLICATIONS_TABLE} is missing: run the App API's migrations first`,
    );
  }
}

async function migrate(
  client: pg.ClientBase,
  files: readonly MigrationFile[],
  logger: MigrationLogger,
): Promise<MigrationReport> {
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
