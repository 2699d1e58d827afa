import { connectionConfig } from '../../shared/db.js';
import { runMigrations } from '../../shared/migrations/index.js';
import { loadSettings } from '../../shared/settings.js';
import type { CliIo, Command } from '../command.js';
import { EXIT, JSON_OPTION, parseCommandArgs } from '../command.js';
import { renderJson } from '../output.js';

/** `migrate`: applies the pending SQL migrations. */
export const migrate: Command = {
  name: 'migrate',
  summary: 'apply the pending SQL migrations',
  help: `Usage: storage-consumer migrate [--json]

Applies the pending migrations of migrations/ to the database named by DATABASE_URL (or the PG*
variables), each file in its own transaction with its tracking row, under an advisory lock (safe
to run from several places at once). Fails (exit 1) when the App API's table is missing, when an
applied file was changed since, or when a file fails (earlier files stay applied).

  --json    the report as JSON
`,
  async run(args: readonly string[], io: CliIo): Promise<number> {
    const parsed = parseCommandArgs(migrate, args, io, JSON_OPTION);
    if (!parsed) return EXIT.ok;
    const settings = loadSettings(io.env);
    const report = await runMigrations({
      connection: connectionConfig(settings.database),
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
