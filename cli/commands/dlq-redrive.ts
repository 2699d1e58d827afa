/**
 * `storage-consumer dlq redrive`: pending dead letters through their pipeline again (the work is
 * cli/redrive.ts's), with progress on a terminal and a summary (docs/operations.md, "Dead
 * letters").
 */
import { resolveActor } from '../../shared/operator-actions.js';
import type { CliIo } from '../command.js';
import { defineCommand, EXIT, jsonOption } from '../command.js';
import { withDatabase } from '../context.js';
import { renderJson, renderTable } from '../output.js';
import type { PipelineRedrive, RedriveProgress } from '../redrive.js';
import { redriveDeadLetters, RedriveStoppedError } from '../redrive.js';
import { FILTER_OPTIONS, parseFilter } from './dlq-filter.js';
import { auditPolicy, auditRefusal, NO_AUDIT_OPTION, reportUnrecorded } from './no-audit-option.js';

/** `dlq redrive`: the pending dead letters through the pipeline again. */
export const dlqRedrive = defineCommand({
  name: 'redrive',
  summary: 're-run pending dead letters through their pipeline',
  description: `Re-runs the selected dead letters that were not re-driven yet through the same pipeline code as
Kafka's records (decode, resolve the app, upsert), one transaction per batch of the pipeline's
batch size. The ones that now succeed are stored and marked re-driven in that transaction; the
ones that fail again stay, with their reason and detail updated. Typical use: an app was
registered after its messages arrived (reason unknown_application). Running it again changes
nothing. A payload that was truncated when it was stored cannot be re-driven: it is listed and
left alone. Exit 0 when the re-drive ran (whatever failed again is reported), 1 on an error.
On a terminal it shows its progress on stderr after every batch; it ends with a summary line
(with --json: a "summary" object beside the per-pipeline figures). Each letter that fails
again is named (its id; --json: stillFailingIds). Every batch leaves an entry in the audit
trail in its own transaction (storage-consumer audit): a batch whose entry cannot be written
is rolled back and the re-drive stops (exit 1, the batches before it done), unless --no-audit.`,
  options: { ...FILTER_OPTIONS, ...jsonOption('the report as JSON'), ...NO_AUDIT_OPTION },
  async run({ values }, io) {
    const filter = parseFilter(values);
    const started = performance.now();
    const progress = io.interactive === true ? terminalProgress(io) : undefined;
    // A warning logged during the run starts on a line of its own, below the progress line.
    const logged: CliIo = progress
      ? {
          ...io,
          stderr: (text) => {
            progress.interrupt();
            io.stderr(text);
          },
        }
      : io;
    let results: PipelineRedrive[];
    try {
      results = await withDatabase(logged, ({ pool, settings, logger }) =>
        redriveDeadLetters(pool, settings, filter, logger, resolveActor(io.env), auditPolicy(values), progress?.show),
      );
    } catch (error) {
      const done =
        error instanceof RedriveStoppedError
          ? `that batch of ${error.pipeline} was rolled back; ${error.done.redriven} letter(s) of ${error.pipeline} were re-driven ` +
            `(and recorded) by the batches before it, earlier pipelines in full`
          : undefined;
      throw auditRefusal(error, 'dlq redrive', done);
    } finally {
      progress?.end();
    }
    for (const result of results) {
      if (result.unrecordedBatches > 0) {
        reportUnrecorded(
          io,
          'dlq redrive',
          `${result.unrecordedBatches} batch(es) of ${result.pipeline}: ${result.unrecordedReason ?? ''}`,
        );
      }
    }
    const summary = summarize(results, Math.round(performance.now() - started));
    if (values.json === true) {
      io.stdout(renderJson({ summary, pipelines: results }));
      return EXIT.ok;
    }
    io.stdout(
      renderTable<PipelineRedrive>(
        [
          { header: 'PIPELINE', value: (result) => result.pipeline },
          { header: 'SELECTED', value: (result) => result.selected, align: 'right' },
          { header: 'REDRIVEN', value: (result) => result.redriven, align: 'right' },
          { header: 'STILL_FAILING', value: (result) => result.stillFailing, align: 'right' },
          { header: 'NOT_REDRIVABLE', value: (result) => result.notRedrivable.length, align: 'right' },
          { header: 'INSERTED', value: (result) => result.inserted, align: 'right' },
          { header: 'UPDATED', value: (result) => result.updated, align: 'right' },
          { header: 'SKIPPED', value: (result) => result.skipped, align: 'right' },
        ],
        results,
      ),
    );
    for (const result of results) {
      for (const left of result.notRedrivable) io.stdout(`not re-driven: dead letter ${left.id} (${result.pipeline}): ${left.why}\n`);
      if (result.stillFailingIds.length > 0) {
        io.stdout(`still failing, left pending: dead letter(s) ${idRanges(result.stillFailingIds)} (${result.pipeline})\n`);
      }
    }
    io.stdout(
      `re-driven ${summary.redriven} of ${summary.selected} selected dead letter(s) in ${(summary.durationMs / 1000).toFixed(1)} s; ` +
        `${summary.stillFailing} still failing, ${summary.notRedrivable} not re-drivable\n`,
    );
    return EXIT.ok;
  },
});

/** Ids in id order as ranges: `4-6, 9, 11-12`. */
function idRanges(ids: readonly string[]): string {
  const numbers = ids.map((id) => BigInt(id)).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const ranges: string[] = [];
  let start = numbers[0];
  let end = start;
  for (const id of [...numbers.slice(1), undefined]) {
    if (id !== undefined && end !== undefined && id === end + 1n) {
      end = id;
      continue;
    }
    if (start !== undefined) ranges.push(start === end ? `${start}` : `${start}-${end}`);
    start = id;
    end = id;
  }
  return ranges.join(', ');
}

/** The whole run in one object: every pipeline's figures added up, and how long it took. */
function summarize(results: readonly PipelineRedrive[], durationMs: number) {
  const sum = (figure: (result: PipelineRedrive) => number) => results.reduce((total, result) => total + figure(result), 0);
  return {
    selected: sum((result) => result.selected),
    redriven: sum((result) => result.redriven),
    stillFailing: sum((result) => result.stillFailing),
    notRedrivable: sum((result) => result.notRedrivable.length),
    inserted: sum((result) => result.inserted),
    updated: sum((result) => result.updated),
    skipped: sum((result) => result.skipped),
    durationMs,
  };
}

/** One line per pipeline on the terminal, rewritten after every batch. */
function terminalProgress(io: CliIo): { show: (progress: RedriveProgress) => void; interrupt: () => void; end: () => void } {
  let pipeline: string | undefined;
  let open = false;
  const close = () => {
    if (open) io.stderr('\n');
    open = false;
  };
  return {
    show(progress) {
      // Each pipeline keeps its last line; the next one starts below it.
      if (pipeline !== progress.pipeline) close();
      const percent = progress.total > 0 ? Math.floor((100 * progress.done) / progress.total) : 100;
      io.stderr(
        `\r${progress.pipeline}: ${progress.done} of ${progress.total} (${percent}%), ` +
          `${progress.redriven} re-driven, ${progress.stillFailing} still failing\x1b[K`,
      );
      pipeline = progress.pipeline;
      open = true;
    },
    interrupt: close,
    end: close,
  };
}
