import type pg from 'pg';
import { beginBatchTransaction } from '../../shared/connection.js';
import type { DatabaseSettings } from '../../shared/settings.js';
import type { CliIo, Command } from '../command.js';
import { EXIT, JSON_OPTION, parseCommandArgs, UsageError } from '../command.js';
import { withDatabase } from '../context.js';
import type { PurgeGroup, PurgeSelection } from '../dead-letter-store.js';
import { pendingKeptByPurge, purgeableDeadLetters, purgeDeadLetters } from '../dead-letter-store.js';
import { renderJson, renderTable } from '../output.js';
import { parseDuration } from '../time.js';
import { FILTER_HELP, FILTER_OPTIONS, parseFilter } from './dlq-filter.js';

const OPTIONS = {
  ...FILTER_OPTIONS,
  ...JSON_OPTION,
  'older-than': { type: 'string' },
  'include-pending': { type: 'boolean' },
  yes: { type: 'boolean' },
} as const;

/** The youngest a dead letter may be and still be purged: the alarm it raised may still be under investigation. */
const MIN_PURGE_AGE = '1d';
const MIN_PURGE_AGE_MS = parseDuration(MIN_PURGE_AGE, MIN_PURGE_AGE);

/** `dlq purge --older-than <duration> [--include-pending] [--yes]`: deletes old dead letters. */
export const dlqPurge: Command = {
  name: 'purge',
  summary: 'delete old re-driven dead letters (asks for --yes)',
  help: `Usage: storage-consumer dlq purge --older-than <duration> [--include-pending] [--yes] [--pipeline P] [--reason R] [--since T] [--json]

Deletes the dead letters stored longer ago than <duration> (at least ${MIN_PURGE_AGE}; e.g. 30d, 12h, 2w) that
were re-driven. A pending letter is kept unless --include-pending is given: a pending
unknown_application letter is the only copy of a valid message (its offset was committed).

Without --yes nothing is deleted: it prints what would be, per pipeline and reason with the
oldest and newest dates. With --yes it deletes them and prints the same for what it deleted.

  --older-than D     required: the age, at least ${MIN_PURGE_AGE}
  --include-pending  also letters never re-driven (their messages are gone for good)
  --yes              delete; without it the command only reports
${FILTER_HELP}
  --json             the result as JSON
`,
  async run(args: readonly string[], io: CliIo): Promise<number> {
    const parsed = parseCommandArgs(dlqPurge, args, io, OPTIONS);
    if (!parsed) return EXIT.ok;
    const olderThan = parsed.values['older-than'];
    if (olderThan === undefined) throw new UsageError('--older-than is required (e.g. --older-than 30d)');
    const olderThanMs = parseDuration(olderThan, '--older-than');
    if (olderThanMs < MIN_PURGE_AGE_MS) throw new UsageError(`--older-than must be at least ${MIN_PURGE_AGE}, got ${olderThan}`);
    const confirmed = parsed.values.yes === true;
    const selection: PurgeSelection = {
      ...parseFilter(parsed.values),
      before: new Date(Date.now() - olderThanMs),
      includePending: parsed.values['include-pending'] === true,
    };
    const { groups, pendingKept } = await withDatabase(io, async ({ pool, settings }) => ({
      groups: confirmed ? await deleteBounded(pool, settings.database, selection) : await purgeableDeadLetters(pool, selection),
      pendingKept: await pendingKeptByPurge(pool, selection),
    }));
    const total = groups.reduce((sum, group) => sum + group.count, 0);
    if (parsed.values.json === true) {
      io.stdout(
        renderJson({
          olderThan,
          before: selection.before.toISOString(),
          includePending: selection.includePending,
          confirmed,
          [confirmed ? 'deleted' : 'wouldDelete']: total,
          groups: groups.map((group) => ({ ...group, oldest: group.oldest.toISOString(), newest: group.newest.toISOString() })),
          pendingKept,
        }),
      );
      return EXIT.ok;
    }
    const which = selection.includePending ? 'dead letter(s), pending or re-driven,' : 're-driven dead letter(s)';
    io.stdout(`${confirmed ? 'deleted' : 'would delete'} ${total} ${which} stored before ${selection.before.toISOString()} (older than ${olderThan})\n`);
    if (total > 0) io.stdout(renderGroups(groups));
    if (pendingKept > 0) io.stdout(`kept ${pendingKept} pending dead letter(s) of that age, never re-driven (--include-pending to include them)\n`);
    if (!confirmed) io.stdout(total > 0 ? 'nothing was deleted: run again with --yes to delete them\n' : 'nothing was deleted\n');
    return EXIT.ok;
  },
};

function renderGroups(groups: readonly PurgeGroup[]): string {
  return renderTable<PurgeGroup>(
    [
      { header: 'PIPELINE', value: (group) => group.pipeline },
      { header: 'REASON', value: (group) => group.reason },
      { header: 'COUNT', value: (group) => group.count, align: 'right' },
      { header: 'OLDEST', value: (group) => group.oldest.toISOString() },
      { header: 'NEWEST', value: (group) => group.newest.toISOString() },
    ],
    groups,
  );
}

/**
 * The DELETE under the service's statement timeout, set inside its transaction as the batches
 * do: a purge the server stops is rolled back, never committed after the client has given up.
 */
async function deleteBounded(pool: pg.Pool, database: DatabaseSettings, selection: PurgeSelection): Promise<PurgeGroup[]> {
  const client = await pool.connect();
  let failed: Error | undefined;
  try {
    await beginBatchTransaction(client, database);
    const groups = await purgeDeadLetters(client, selection);
    await client.query('COMMIT');
    return groups;
  } catch (error) {
    failed = error instanceof Error ? error : new Error(String(error));
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release(failed);
  }
}

