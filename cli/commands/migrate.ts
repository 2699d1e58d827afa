import { migrationConnection, runMigrations } from '../../shared/migrations/index.js';
import { loadSettings } from '../../shared/settings.js';
import type { CliIo, Command } from '../command.js';
import { EXIT, JSON_OPTION, parseCommandArgs } from '../command.js';
import { renderJson } from '../output.js';

/** `migrate`: applies the pending SQL migrations. */
export const migrate: Command = {
  name: 'migrate',
  summary: 'apply the pending SQL migrations',
  help: `Usage: storage-consumer migrate [--json]
       npm run migrate -- [--json]

Applies the pending migrations of migrations/ (or STORAGE_MIGRATIONS_DIR) to the database named
by DATABASE_URL (or the PG* variables), each file in its own transaction with its tracking row,
under an advisory lock (safe to run from several places at once). It connects as the Lambda
custom resource and the host's migrate-on-start do: same TLS (STORAGE_DB_SSL) and connect
timeout as the batches, no statement timeout, and a wait for another runner's lock of at most
STORAGE_MIGRATION_LOCK_TIMEOUT_MS (default 10 minutes). Fails (exit 1) when the App API's table
is missing, when an applied file was changed since, when a file fails (earlier files stay
applied) or when the lock was not free in time.

  --json    the report as JSON
`,
  async run(args: readonly string[], io: CliIo): Promise<number> {
    const parsed = parseCommandArgs(migrate, args, io, JSON_OPTION);
    if (!parsed) return EXIT.ok;
    const settings = loadSettings(io.env);
    const report = await runMigrations({
      ...migrationConnection(settings.database),
      directory: io.env.STORAGE_MIGRATIONS_DIR || undefined,
      logger: { info: () => undefined, warn: (message, extra) => io.stderr(`${JSON.stringify({ level: 'warn', message, ...extra })}\n`) },
    });
    if (parsed.values.json === true) {
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
};
