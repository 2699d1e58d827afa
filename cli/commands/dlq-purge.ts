/**
 * `storage-consumer dlq purge`: deletes old dead letters in two steps: a preview that prints the
 * exact command for the set it shows, then `--yes --expect`, which deletes that set or nothing,
 * with its audit entry in the deleting transaction (docs/operations.md, "Dead letters").
 */
import type pg from 'pg';
import { beginBatchTransaction } from '../../shared/connection.js';
import { isServerAnswer } from '../../shared/error-classification.js';
import { AuditUnavailableError, recordInTransaction, resolveActor } from '../../shared/operator-actions.js';
import type { AuditRecord } from '../../shared/operator-actions.js';
import type { DatabaseSettings } from '../../shared/settings.js';
import { defineCommand, EXIT, jsonOption, RefusedError, UsageError } from '../command.js';
import { withDatabase } from '../context.js';
import type { PendingKept, PurgeGroup, PurgeSelection, PurgeSet } from '../dead-letter-store.js';
import { pendingKeptByPurge, purgeableDeadLetters, purgeDeadLetters, REDRIVABLE_REASONS } from '../dead-letter-store.js';
import { renderJson, renderTable } from '../output.js';
import { parseDuration, parseInstant } from '../time.js';
import { FILTER_OPTIONS, parseFilter } from './dlq-filter.js';
import { auditPolicy, auditRefusal, NO_AUDIT_OPTION, reportUnrecorded } from './no-audit-option.js';

/** The youngest a dead letter may be and still be purged: the alarm it raised may still be under investigation. */
const MIN_PURGE_AGE = '1d';
const MIN_PURGE_AGE_MS = parseDuration(MIN_PURGE_AGE, MIN_PURGE_AGE);

/** `--expect <count>:<digest>`: the set a preview showed. */
const EXPECT = /^(\d+):([0-9a-f]{12})$/;

/** `dlq purge (--older-than <duration> | --before <instant>) [--include-pending] [--expect N:D] [--yes]`. */
export const dlqPurge = defineCommand({
  name: 'purge',
  summary: 'delete old re-driven dead letters (asks for --yes)',
  usage: [
    '(--older-than <D> | --before <T>) [--include-pending] [--pipeline <P>] [--reason <R>] [--since <T>]\n' +
      '                                [--expect <N:DIGEST>] [--yes] [--no-audit] [--json]',
  ],
  description: `Deletes the dead letters stored before a cut-off (at least ${MIN_PURGE_AGE} ago) that were re-driven.

A pending letter (never re-driven) is kept unless --include-pending is given. Even then, a
pending letter of a re-drivable reason (${REDRIVABLE_REASONS.join(', ')}) is kept unless --reason
names that reason: it is the only copy of a valid message (its offset was committed).

Without --yes nothing is deleted: it prints the absolute cut-off, what would be deleted per
pipeline and reason (oldest and newest dates), what it keeps, and the exact command that deletes
that set: with --before (the cut-off fixed) and --expect (the set's size and digest). With --yes
and --expect it deletes exactly that set or, if the set changed since (letters re-driven or
purged meanwhile), nothing (exit 1). Every --yes leaves an entry in the audit trail, in the
deleting transaction (storage-consumer audit); when that entry cannot be written nothing is
deleted (exit 1), unless --no-audit.`,
  options: {
    'older-than': { type: 'string', value: 'D', help: `the age, at least ${MIN_PURGE_AGE} (e.g. 30d, 12h, 2w): the cut-off is now - D` },
    before: { type: 'string', value: 'T', help: 'the cut-off as an instant (ISO 8601, UTC unless it has an offset)' },
    'include-pending': {
      type: 'boolean',
      help: 'also letters never re-driven (their messages are gone for good), except re-drivable reasons not named by --reason',
    },
    expect: { type: 'string', value: 'N:DIGEST', help: 'with --yes: delete only if the set is still the one the preview showed' },
    yes: { type: 'boolean', help: 'delete; without it the command only reports' },
    ...FILTER_OPTIONS,
    ...jsonOption('the result as JSON'),
    ...NO_AUDIT_OPTION,
  },
  async run({ values }, io) {
    const olderThan = values['older-than'];
    if ((olderThan === undefined) === (values.before === undefined)) {
      throw new UsageError('give exactly one of --older-than (e.g. --older-than 30d) and --before (an instant)');
    }
    const now = Date.now();
    const before =
      olderThan !== undefined ? new Date(now - parseDuration(olderThan, '--older-than')) : parseInstant(values.before ?? '', '--before');
    if (now - before.getTime() < MIN_PURGE_AGE_MS) {
      throw new UsageError(
        olderThan !== undefined
          ? `--older-than must be at least ${MIN_PURGE_AGE}, got ${olderThan}`
          : `--before must be at least ${MIN_PURGE_AGE} ago, got ${before.toISOString()}`,
      );
    }
    const expected = values.expect === undefined ? undefined : EXPECT.exec(values.expect);
    if (expected === null)
      throw new UsageError(`--expect must be <count>:<12 hex digits> as the preview prints it, got ${JSON.stringify(values.expect)}`);
    const confirmed = values.yes === true;
    if (expected !== undefined && !confirmed) throw new UsageError('--expect goes with --yes');
    const filter = parseFilter(values);
    const selection: PurgeSelection = { ...filter, before, includePending: values['include-pending'] === true };
    const command = exactCommand(selection, io.invokedAs ?? 'storage-consumer');
    const expectation = expected === undefined ? undefined : { total: Number(expected[1]), digest: expected[2] ?? '' };

    const policy = auditPolicy(values);
    const { set, kept, audit } = await withDatabase(io, async ({ pool, settings }) => {
      const kept = await pendingKeptByPurge(pool, selection);
      if (!confirmed) return { set: await purgeableDeadLetters(pool, selection), kept, audit: undefined };
      const actor = resolveActor(io.env);
      const deleted = await deleteBounded(pool, settings.database, selection, async (client, set) => {
        if (expectation && (set.total !== expectation.total || set.digest !== expectation.digest)) {
          throw new RefusedError(
            `the set changed since the preview (it had ${expectation.total} letter(s), digest ${expectation.digest}; ` +
              `it now has ${set.total}, digest ${set.digest}): nothing was deleted; run the preview again`,
          );
        }
        return recordInTransaction(
          client,
          {
            actor,
            command: 'dlq purge',
            arguments: {
              before: before.toISOString(),
              ...(olderThan === undefined ? {} : { olderThan }),
              ...(filter.pipeline === undefined ? {} : { pipeline: filter.pipeline }),
              ...(filter.reason === undefined ? {} : { reason: filter.reason }),
              ...(filter.since === undefined ? {} : { since: filter.since.toISOString() }),
              includePending: selection.includePending,
              ...(expectation === undefined ? {} : { expect: values.expect }),
            },
            outcome: { counts: { deleted: set.total }, digest: set.digest, groups: jsonGroups(set.groups) },
          },
          policy,
        );
      });
      return { set: deleted.set, kept, audit: deleted.audit };
    }).catch((error) => {
      throw auditRefusal(error, 'dlq purge', 'nothing was deleted');
    });
    if (audit?.unrecorded !== undefined) reportUnrecorded(io, 'dlq purge', audit.unrecorded);
    const auditId = audit?.id;

    if (values.json === true) {
      io.stdout(
        renderJson({
          ...(olderThan === undefined ? {} : { olderThan }),
          before: before.toISOString(),
          includePending: selection.includePending,
          confirmed,
          [confirmed ? 'deleted' : 'wouldDelete']: set.total,
          digest: set.digest,
          groups: jsonGroups(set.groups),
          pendingKept: kept.total,
          redrivableKept: kept.redrivable,
          ...(confirmed
            ? { auditId: auditId ?? null, ...(audit?.unrecorded === undefined ? {} : { auditUnrecorded: audit.unrecorded }) }
            : { command: set.total > 0 ? `${command} --expect ${set.total}:${set.digest} --yes` : null }),
        }),
      );
      return EXIT.ok;
    }
    const which = selection.includePending ? 'dead letter(s), pending or re-driven,' : 're-driven dead letter(s)';
    const age = olderThan === undefined ? '' : ` (older than ${olderThan})`;
    io.stdout(`${confirmed ? 'deleted' : 'would delete'} ${set.total} ${which} stored before ${before.toISOString()}${age}\n`);
    if (set.total > 0) io.stdout(renderGroups(set.groups, selection.includePending));
    const pending = set.groups.reduce((sum, group) => sum + group.pending, 0);
    if (selection.includePending && set.total > 0)
      io.stdout(
        `of them ${pending} pending (never re-driven: their messages are gone for good once deleted; ` +
          `dlq list --pending --pipeline P --reason R names them), ${set.total - pending} re-driven\n`,
      );
    io.stdout(keptLines(kept, selection));
    if (confirmed && auditId !== undefined) io.stdout(`audit entry ${auditId} written\n`);
    else if (confirmed) io.stdout('no audit entry written (--no-audit)\n');
    else if (set.total === 0) io.stdout('nothing was deleted\n');
    else
      io.stdout(
        `nothing was deleted; to delete exactly these ${set.total}, run:\n  ${command} --expect ${set.total}:${set.digest} --yes\n`,
      );
    return EXIT.ok;
  },
});

/** What the purge leaves alone, and how to take it if that is really meant. */
function keptLines(kept: PendingKept, selection: PurgeSelection): string {
  let text = '';
  const plain = kept.total - kept.redrivable;
  if (plain > 0) text += `kept ${plain} pending dead letter(s) of that age, never re-driven (--include-pending to include them)\n`;
  if (kept.redrivable > 0) {
    text +=
      `kept ${kept.redrivable} pending ${REDRIVABLE_REASONS.join(' / ')} dead letter(s) of that age: each is the only copy of a valid ` +
      `message; ` +
      `re-drive them (dlq redrive), or name the reason (--reason R${selection.includePending ? '' : ' --include-pending'}) to delete ` +
      `them\n`;
  }
  return text;
}

/**
 * The command that deletes exactly the previewed set (the cut-off and `--since` as instants),
 * started the way the operator started this one (`npx storage-consumer`), so it can be pasted.
 */
function exactCommand(selection: PurgeSelection, invokedAs: string): string {
  const parts = [`${invokedAs} dlq purge`, `--before ${selection.before.toISOString()}`];
  if (selection.pipeline !== undefined) parts.push(`--pipeline ${selection.pipeline}`);
  if (selection.reason !== undefined) parts.push(`--reason ${selection.reason}`);
  if (selection.since !== undefined) parts.push(`--since ${selection.since.toISOString()}`);
  if (selection.includePending) parts.push('--include-pending');
  return parts.join(' ');
}

function jsonGroups(groups: readonly PurgeGroup[]) {
  return groups.map((group) => ({ ...group, oldest: group.oldest.toISOString(), newest: group.newest.toISOString() }));
}

function renderGroups(groups: readonly PurgeGroup[], withPending: boolean): string {
  return renderTable<PurgeGroup>(
    [
      { header: 'PIPELINE', value: (group) => group.pipeline },
      { header: 'REASON', value: (group) => group.reason },
      { header: 'COUNT', value: (group) => group.count, align: 'right' },
      ...(withPending ? [{ header: 'PENDING', value: (group: PurgeGroup) => group.pending, align: 'right' as const }] : []),
      { header: 'OLDEST', value: (group) => group.oldest.toISOString() },
      { header: 'NEWEST', value: (group) => group.newest.toISOString() },
    ],
    groups,
  );
}

/**
 * The DELETE under the service's statement timeout, set inside its transaction as the batches
 * do: a purge the server stops is rolled back, never committed after the client has given up.
 * `check` runs in the transaction before COMMIT (the expected set, the audit entry); a throw
 * rolls everything back. A ROLLBACK is sent only while the server answers: a client whose
 * query timed out is destroyed (the server rolls back), not kept waiting one more timeout.
 */
async function deleteBounded(
  pool: pg.Pool,
  database: DatabaseSettings,
  selection: PurgeSelection,
  check: (client: pg.PoolClient, set: PurgeSet) => Promise<AuditRecord>,
): Promise<{ set: PurgeSet; audit: AuditRecord }> {
  const client = await pool.connect();
  let failed: Error | undefined;
  try {
    await beginBatchTransaction(client, database);
    const set = await purgeDeadLetters(client, selection);
    const audit = await check(client, set);
    await client.query('COMMIT');
    return { set, audit };
  } catch (error) {
    const answered = isServerAnswer(error) || error instanceof RefusedError || error instanceof AuditUnavailableError;
    if (answered) await client.query('ROLLBACK').catch(() => undefined);
    else failed = error instanceof Error ? error : new Error(String(error));
    throw error;
  } finally {
    client.release(failed);
  }
}
