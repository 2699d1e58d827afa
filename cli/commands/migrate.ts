/**
 * `storage-consumer migrate` (= `npm run migrate`): the pending migrations applied by the migration
 * runner (shared/migrations/), then the live schema compared with what they define
 * (docs/operations.md, "Migrations").
 */
import pg from 'pg';
import { findSchemaDrift } from '../../shared/migrations/drift.js';
import { DEFAULT_MIGRATIONS_DIRECTORY, loadMigrations, migrationConnection, runMigrations } from '../../shared/migrations/index.js';
import { loadSettings } from '../../shared/settings.js';
import { loadSetting } from '../../shared/setting.js';
import { STORAGE_MIGRATIONS_DIR } from '../../shared/setting-declarations.js';
import { defineCommand, EXIT, jsonOption, RefusedError } from '../command.js';
import { renderJson } from '../output.js';
import { cliLogLine } from '../context.js';

/** `migrate`: applies the pending SQL migrations. */
export const migrate = defineCommand({
  name: 'migrate',
  summary: 'apply the pending SQL migrations',
  description: `Applies the pending migrations of migrations/ (or STORAGE_MIGRATIONS_DIR) to the database named
by DATABASE_URL (or the PG* variables), each file in its own transaction with its tracking row,
under an advisory lock (safe to run from several places at once). It connects as the Lambda
custom resource and the host's migrate-on-start do: same TLS (STORAGE_DB_SSL) and connect
timeout as the batches, no statement timeout, and a wait for another runner's lock of at most
STORAGE_MIGRATION_LOCK_TIMEOUT_MS (default 10 minutes). Fails (exit 1) when the App API's table
is missing, when an applied file was changed since, when a file fails (earlier files stay
applied) or when the lock was not free in time. While it waits for another runner's lock it
says so on stderr. Afterwards it compares the live schema with what the applied migrations
define (tables, columns and their types, unique keys) and fails (exit 1) naming every
difference, e.g. "table network_metrics is missing though migration 0003 is recorded".
npm run migrate -- [--json] runs the same.`,
  options: jsonOption('the report as JSON'),
  async run({ values }, io) {
    const settings = loadSettings(io.env);
    const directory = loadSetting(io.env, STORAGE_MIGRATIONS_DIR);
    const connection = migrationConnection(settings.database);
    const line = (level: string, message: string, extra?: object) => io.stderr(cliLogLine(level, message, extra));
    const report = await runMigrations({
      ...connection,
      directory,
      logger: {
        // Only the lock wait is worth a line: without it, a wait of up to 10 minutes is silence.
        info: (message, extra) => (/lock/i.test(message) ? line('INFO', message, extra) : undefined),
        warn: (message, extra) => line('WARN', message, extra),
      },
    });
    const files = await loadMigrations(directory ?? DEFAULT_MIGRATIONS_DIRECTORY);
    const client = new pg.Client(connection.connection);
    await client.connect();
    let drift: string[];
    try {
      drift = await findSchemaDrift(client, files);
    } finally {
      await client.end();
    }
    if (drift.length > 0) {
      throw new RefusedError(`the schema differs from what the applied migrations define: ${drift.join('; ')}`);
    }
    if (values.json === true) {
      io.stdout(renderJson(report));
      return EXIT.ok;
    }
    for (const applied of report.applied) io.stdout(`applied ${String(applied.version).padStart(4, '0')}_${applied.name}\n`);
    io.stdout(
      `schema up to date: ${report.applied.length} applied now, ${report.alreadyApplied} already applied` +
        `${report.unknownApplied.length > 0 ? `, newer than this code: ${report.unknownApplied.join(', ')}` : ''}\n`,
    );
    return EXIT.ok;
  },
});
