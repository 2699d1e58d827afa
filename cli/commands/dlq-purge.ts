import type { CliIo, Command } from '../command.js';
import { EXIT, JSON_OPTION, parseCommandArgs, UsageError } from '../command.js';
import { withDatabase } from '../context.js';
import { countPurgeable, purgeDeadLetters } from '../dead-letter-store.js';
import { renderJson } from '../output.js';
import { parseDuration } from '../time.js';
import { FILTER_HELP, FILTER_OPTIONS, parseFilter } from './dlq-filter.js';

const OPTIONS = { ...FILTER_OPTIONS, ...JSON_OPTION, 'older-than': { type: 'string' }, 'dry-run': { type: 'boolean' } } as const;

/** `dlq purge --older-than <duration>`: deletes old dead letters. */
export const dlqPurge: Command = {
  name: 'purge',
  summary: 'delete dead letters older than a given age',
  help: `Usage: storage-consumer dlq purge --older-than <duration> [--pipeline P] [--reason R] [--since T] [--dry-run] [--json]

Deletes the dead letters stored longer ago than <duration> (30d, 12h, 90m, 45s, 2w), re-driven or
not, and prints how many.

  --older-than D  required: the age, e.g. 30d
${FILTER_HELP}
  --dry-run       only count them
  --json          the result as JSON
`,
  async run(args: readonly string[], io: CliIo): Promise<number> {
    const parsed = parseCommandArgs(dlqPurge, args, io, OPTIONS);
    if (!parsed) return EXIT.ok;
    const olderThan = parsed.values['older-than'];
    if (olderThan === undefined) throw new UsageError('--older-than is required (e.g. --older-than 30d)');
    const olderThanMs = parseDuration(olderThan, '--older-than');
    const filter = parseFilter(parsed.values);
    const dryRun = parsed.values['dry-run'] === true;
    const count = await withDatabase(io, ({ pool }) =>
      dryRun ? countPurgeable(pool, olderThanMs, filter) : purgeDeadLetters(pool, olderThanMs, filter),
    );
    if (parsed.values.json === true) io.stdout(renderJson({ olderThan, dryRun, [dryRun ? 'wouldDelete' : 'deleted']: count }));
    else io.stdout(`${dryRun ? 'would delete' : 'deleted'} ${count} dead letter(s) older than ${olderThan}\n`);
    return EXIT.ok;
  },
};
