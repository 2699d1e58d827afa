/**
 * `storage-consumer audit`: the audit trail (`operator_actions`, shared/operator-actions.ts) listed
 * oldest first, as a table or as JSON (docs/operations.md, "The audit trail").
 */
import { listOperatorActions } from '../../shared/operator-actions.js';
import type { OperatorActionEntry } from '../../shared/operator-actions.js';
import { defineCommand, EXIT, jsonOption, UsageError } from '../command.js';
import { withDatabase } from '../context.js';
import { renderJson, renderTable } from '../output.js';
import { parseSince } from '../time.js';

const DEFAULT_LIMIT = 100;

/** One line of an entry's outcome for the table: counts, partitions moved, ranges skipped. */
function outcomeText(entry: OperatorActionEntry): string {
  const parts: string[] = [];
  const { counts, partitions, skipped } = entry.outcome;
  if (counts)
    parts.push(
      Object.entries(counts)
        .map(([name, value]) => `${name} ${value}`)
        .join(', '),
    );
  if (partitions && partitions.length > 0)
    parts.push(
      partitions
        .map((p) => {
          const observed = p as typeof p & { readonly planned?: string; readonly applied?: boolean };
          const missed = observed.applied === false ? ` (planned ${observed.planned ?? '?'}, NOT applied)` : '';
          return `p${p.partition} ${p.before ?? 'none'}->${p.after ?? 'none'}${missed}`;
        })
        .join(' '),
    );
  if (skipped && skipped.length > 0)
    parts.push(`skipped ${skipped.map((range) => `p${range.partition} [${range.from}, ${range.to})`).join(' ')}`);
  for (const [key, value] of Object.entries(entry.outcome)) {
    if (!['counts', 'partitions', 'skipped', 'groups', 'digest', 'ids'].includes(key)) parts.push(`${key} ${JSON.stringify(value)}`);
  }
  return parts.join('; ');
}

/** `audit [--since T] [--limit N] [--json]`: the operator actions recorded in `operator_actions`. */
export const audit = defineCommand({
  name: 'audit',
  summary: 'list the audit trail: who replayed, purged, re-drove, paused or resumed what, and the outcome',
  description: `Lists the entries of the audit trail (table operator_actions), oldest first: when, who (the
OS user@host, or STORAGE_ACTOR), the command, its state, its arguments and its outcome (counts;
committed offsets before and after per partition; offset ranges skipped). Every state-changing
command writes one before its change takes effect: dlq purge --yes, dlq redrive (one per
batch), pause and resume in the change's own transaction ("completed"); replay first as
"started" with its plan, completed after the reset ("completed", or "failed" naming what did
not happen). An entry still "started" is a replay whose end was never recorded.`,
  options: {
    since: { type: 'string', value: 'T', help: 'only entries since T: an ISO timestamp or a duration ago such as 24h, 7d' },
    limit: { type: 'string', value: 'N', help: `the newest N entries (default ${DEFAULT_LIMIT})` },
    ...jsonOption('the entries as JSON, outcome and arguments whole'),
  },
  async run({ values }, io) {
    const since = values.since === undefined ? undefined : parseSince(values.since, '--since');
    const limitText = values.limit ?? String(DEFAULT_LIMIT);
    if (!/^\d+$/.test(limitText) || Number(limitText) < 1)
      throw new UsageError(`--limit must be a whole number >= 1, got ${JSON.stringify(limitText)}`);
    const entries = await withDatabase(io, ({ pool }) =>
      listOperatorActions(pool, { ...(since ? { since } : {}), limit: Number(limitText) }),
    );
    if (values.json === true) {
      io.stdout(
        renderJson({
          entries: entries.map((entry) => ({
            ...entry,
            time: entry.time.toISOString(),
            completedAt: entry.completedAt?.toISOString() ?? null,
          })),
        }),
      );
      return EXIT.ok;
    }
    io.stdout(
      renderTable<OperatorActionEntry>(
        [
          { header: 'ID', value: (entry) => entry.id, align: 'right' },
          { header: 'TIME', value: (entry) => entry.time.toISOString() },
          { header: 'ACTOR', value: (entry) => entry.actor },
          { header: 'COMMAND', value: (entry) => entry.command },
          { header: 'STATE', value: (entry) => entry.state },
          { header: 'ARGUMENTS', value: (entry) => JSON.stringify(entry.arguments) },
          { header: 'OUTCOME', value: (entry) => outcomeText(entry) },
        ],
        entries,
      ),
    );
    return EXIT.ok;
  },
});
