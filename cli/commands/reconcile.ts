/**
 * `storage-consumer reconcile`: proves record by record that every record a pipeline's group has
 * committed is in PostgreSQL, as its row, a row that wins over it, or its dead letter
 * (docs/operations.md, "Proving nothing was lost"). The check is cli/reconcile.ts's; this file
 * parses the command line, shows progress, prints the report and writes its audit entry.
 */
import { kafkaPartitionReader } from '../../kafka/partition-reader.js';
import { loadHostSettings } from '../../config/host-settings.js';
import { recordOperatorAction, resolveActor } from '../../shared/operator-actions.js';
import { PIPELINE_NAMES } from '../../shared/pipelines.js';
import type { PipelineName } from '../../shared/pipelines.js';
import type { CliIo } from '../command.js';
import { defineCommand, EXIT, jsonOption, UsageError } from '../command.js';
import { cliLogger, createCliPool } from '../context.js';
import { renderJson, renderTable } from '../output.js';
import { PROBLEM_CLASSES, RECORD_CLASSES, reconcile as runReconcile, reconciled, totalsOf } from '../reconcile.js';
import type { PartitionCheck, PipelineCheck, Problem, ReconcileProgress, ReconcileReport, ReconcileStart } from '../reconcile.js';
import { parseSince } from '../time.js';
import { parsePipeline } from './pipeline-option.js';

function parseStart(since: string | undefined, from: string | undefined): ReconcileStart {
  if (since !== undefined && from !== undefined) throw new UsageError('give --since or --from earliest, not both');
  if (from !== undefined) {
    if (from !== 'earliest') throw new UsageError(`--from takes earliest, got ${JSON.stringify(from)}`);
    return { kind: 'earliest' };
  }
  return since === undefined ? { kind: 'earliest' } : { kind: 'since', at: parseSince(since, '--since') };
}

function describeStart(start: ReconcileStart): string {
  return start.kind === 'earliest'
    ? 'from the earliest offset on the broker'
    : `from the first record at or after ${start.at.toISOString()}`;
}

/** `1h 02m`, `3m 05s`, `12s`. */
function duration(seconds: number): string {
  const whole = Math.max(0, Math.round(seconds));
  const h = Math.floor(whole / 3600);
  const m = Math.floor((whole % 3600) / 60);
  const s = whole % 60;
  if (h > 0) return `${h}h ${String(m).padStart(2, '0')}m`;
  return m > 0 ? `${m}m ${String(s).padStart(2, '0')}s` : `${s}s`;
}

/** The progress line on a terminal's stderr, rewritten in place. */
function progressLine({ checked, total, elapsedMs }: ReconcileProgress): string {
  const rate = elapsedMs > 0 ? (checked * 1000) / elapsedMs : 0;
  const left = rate > 0 && total > checked ? `, about ${duration((total - checked) / rate)} left` : '';
  return `\rreconcile: ${checked} of ${total} record(s) checked, ${Math.round(rate)}/s${left}\u001b[K`;
}

interface PartitionRow {
  readonly pipeline: string;
  readonly check: PartitionCheck;
}

function renderReport(report: ReconcileReport, auditLine: string): string {
  const rows: PartitionRow[] = report.pipelines.flatMap((pipeline) =>
    pipeline.partitions.map((check) => ({ pipeline: pipeline.pipeline, check })),
  );
  const table = renderTable<PartitionRow>(
    [
      { header: 'PIPELINE', value: (row) => row.pipeline },
      { header: 'PARTITION', value: (row) => row.check.partition, align: 'right' },
      { header: 'FROM', value: (row) => row.check.from, align: 'right' },
      { header: 'TO', value: (row) => row.check.to, align: 'right' },
      { header: 'RECORDS', value: (row) => row.check.records, align: 'right' },
      ...RECORD_CLASSES.map((name) => ({
        header: name.toUpperCase(),
        value: (row: PartitionRow) => row.check.counts[name],
        align: 'right' as const,
      })),
    ],
    rows,
  );
  const lines: string[] = [];
  for (const pipeline of report.pipelines) {
    for (const note of pipeline.notes) lines.push(`${pipeline.pipeline}: ${note}`);
    for (const check of pipeline.partitions)
      for (const note of check.notes) lines.push(`${pipeline.pipeline} partition ${check.partition}: ${note}`);
  }
  for (const pipeline of report.pipelines) {
    for (const check of pipeline.partitions) {
      for (const problem of check.problems) lines.push(problemLine(pipeline, problem));
      for (const name of PROBLEM_CLASSES) {
        const more = check.counts[name] - check.problems.filter((problem) => problem.class === name).length;
        if (more > 0)
          lines.push(
            `(${more} more ${name} record(s) on ${pipeline.topic}-${check.partition} not listed; --json lists the same first ones)`,
          );
      }
    }
  }
  const totals = totalsOf(report.pipelines.flatMap((pipeline) => pipeline.partitions));
  const verdict =
    `${reconciled(report) ? 'reconcile: nothing missing, nothing wrong' : 'reconcile FAILED'}: ${totals.records} record(s) checked in ` +
    `${(report.elapsedMs / 1000).toFixed(1)} s: ${RECORD_CLASSES.map((name) => `${totals[name]} ${name}`).join(', ')}`;
  const heading =
    `reconcile: every record below each group's committed offset as read at ${report.readAt.toISOString()}, ` + describeStart(report.start);
  return `${heading}\n${table}${lines.length > 0 ? `${lines.join('\n')}\n` : ''}${verdict}\n${auditLine}`;
}

function problemLine(pipeline: PipelineCheck, problem: Problem): string {
  const purges =
    problem.purges === undefined
      ? ''
      : problem.purges.length === 0
        ? '; no audited dlq purge accounts for it'
        : `; audited dlq purge(s) that could have deleted it: ${problem.purges.join(', ')}`;
  const key = problem.key === null ? '' : ` ${problem.key}`;
  const place = `${pipeline.topic}-${problem.partition}@${problem.offset}`;
  return `${problem.class} ${place}${key}: expected ${problem.expected}; found ${problem.found}${purges}`;
}

function partitionJson(check: PartitionCheck) {
  return {
    partition: check.partition,
    from: check.from.toString(),
    to: check.to.toString(),
    start: check.bounds.start.toString(),
    end: check.bounds.end.toString(),
    committed: check.bounds.committed?.toString() ?? null,
    records: check.records,
    ...check.counts,
    notes: check.notes,
    problems: check.problems,
  };
}

function reportJson(report: ReconcileReport, audit: { id: string | null; error?: string }) {
  const totals = totalsOf(report.pipelines.flatMap((pipeline) => pipeline.partitions));
  return {
    ok: reconciled(report),
    from: report.start.kind === 'earliest' ? 'earliest' : null,
    since: report.start.kind === 'since' ? report.start.at.toISOString() : null,
    readAt: report.readAt.toISOString(),
    elapsedMs: Math.round(report.elapsedMs),
    ...totals,
    pipelines: report.pipelines.map((pipeline) => ({
      pipeline: pipeline.pipeline,
      topic: pipeline.topic,
      group: pipeline.group,
      topicId: pipeline.topicId,
      ...totalsOf(pipeline.partitions),
      notes: pipeline.notes,
      partitions: pipeline.partitions.map(partitionJson),
    })),
    auditId: audit.id,
    ...(audit.error === undefined ? {} : { auditError: audit.error }),
  };
}

/** The audit entry: what was checked (pipelines, ranges, topic ids) and found (counts). */
function auditAction(report: ReconcileReport, actor: string, requested: readonly PipelineName[] | undefined) {
  const totals = totalsOf(report.pipelines.flatMap((pipeline) => pipeline.partitions));
  return {
    actor,
    command: 'reconcile',
    arguments: {
      pipelines: requested ?? null,
      from: report.start.kind === 'earliest' ? 'earliest' : null,
      since: report.start.kind === 'since' ? report.start.at.toISOString() : null,
    },
    outcome: {
      counts: totals,
      ok: reconciled(report),
      ranges: report.pipelines.flatMap((pipeline) =>
        pipeline.partitions
          .filter((check) => check.to > check.from)
          .map((check) => `${pipeline.topic}-${check.partition} [${check.from}, ${check.to})`),
      ),
      topicIds: Object.fromEntries(report.pipelines.filter((pipeline) => pipeline.topicId !== null).map((p) => [p.topic, p.topicId])),
    },
  };
}

function selectedPipelines(named: readonly string[] | undefined): PipelineName[] | undefined {
  if (named === undefined || named.length === 0) return undefined;
  return [...new Set(named.map((name) => parsePipeline(name) as PipelineName))];
}

/** `reconcile [--pipeline P]... [--since T | --from earliest] [--json]`. */
export const reconcile = defineCommand({
  name: 'reconcile',
  summary: 'prove record by record that every committed record is stored: its row, a row that wins, or its dead letter',
  usage: ['[--pipeline <P>]... [--since <T> | --from earliest] [--json]'],
  description: `Reads each selected pipeline's topic back from Kafka, partition by partition, from the start point up
to the group's committed offset as read when the run begins (records past it are in flight, not
promised yet), decodes and resolves each record exactly as the handler would, and accounts for it:
  stored         its row exists, names this record (source_partition, source_offset) and holds
                 what the record decodes to
  superseded     the row came from another record that wins by the table's rule (app-stats,
                 network-metrics: the first stored; reviews: a newer last_synced_at, or an equal
                 one stored first)
  dead_lettered  a dead letter at its coordinates with its payload's hash (pending or re-driven)
  letter_gone    it would be dead-lettered, and its letter is gone (the audited purges that could
                 account for it are named)
  missing        neither its row nor a dead letter
  wrong          the row names this record but holds other values, names a later record that
                 cannot have been stored first, or (reviews) holds an older version
It never joins a consumer group and never commits; PostgreSQL is read in read-only transactions
(application_name storage-consumer/cli-reconcile, STORAGE_DB_STATEMENT_TIMEOUT_MS), a few thousand
records per transaction and one statement per table. On a terminal it shows its progress on
stderr. It writes one audit entry (command reconcile) with what it checked and found. Exit 0 when
nothing is missing or wrong, 1 otherwise.`,
  options: {
    pipeline: {
      type: 'string',
      value: 'P',
      repeatable: true,
      help: `only pipeline P (${PIPELINE_NAMES.join(', ')}); repeat for several; default those of STORAGE_PIPELINES (all)`,
    },
    since: { type: 'string', value: 'T', help: 'start at the first record at or after T: an ISO timestamp or a duration ago such as 26h' },
    from: { type: 'string', value: 'earliest', help: 'earliest: start at the earliest record on the broker (the default)' },
    ...jsonOption('the report as one JSON document (no progress on stderr)'),
  },
  async run({ values }, io: CliIo) {
    const requested = selectedPipelines(values.pipeline);
    const start = parseStart(values.since, values.from);
    const host = loadHostSettings(io.env);
    const pipelines = requested ?? host.storage.selectedPipelines;
    const showProgress = io.interactive === true && values.json !== true;
    const pool = createCliPool(host.storage.database, cliLogger(io), 'cli-reconcile');
    let reader: Awaited<ReturnType<typeof kafkaPartitionReader>> | undefined;
    try {
      reader = await kafkaPartitionReader(host.kafka);
      const report = await runReconcile({
        pool,
        reader,
        settings: host.storage,
        pipelines,
        start,
        ...(showProgress ? { onProgress: (progress: ReconcileProgress) => io.stderr(progressLine(progress)) } : {}),
      });
      if (showProgress) io.stderr('\r\u001b[K');
      let audit: { id: string | null; error?: string };
      try {
        audit = { id: (await recordOperatorAction(pool, auditAction(report, resolveActor(io.env), requested))).id };
      } catch (error) {
        audit = { id: null, error: error instanceof Error ? error.message : String(error) };
        io.stderr(`storage-consumer reconcile: the audit entry could not be written: ${audit.error}\n`);
      }
      if (values.json === true) io.stdout(renderJson(reportJson(report, audit)));
      else io.stdout(renderReport(report, audit.id === null ? '' : `audit entry ${audit.id} written\n`));
      return reconciled(report) ? EXIT.ok : EXIT.failed;
    } finally {
      await Promise.allSettled([pool.end(), reader?.close()]);
    }
  },
});
