import type { CliIo, Command } from '../command.js';
import { EXIT, JSON_OPTION, parseCommandArgs } from '../command.js';
import { withDatabase } from '../context.js';
import { renderJson, renderTable } from '../output.js';
import type { PipelineRedrive } from '../redrive.js';
import { redriveDeadLetters } from '../redrive.js';
import { FILTER_HELP, FILTER_OPTIONS, parseFilter } from './dlq-filter.js';

/** `dlq redrive`: the pending dead letters through the pipeline again. */
export const dlqRedrive: Command = {
  name: 'redrive',
  summary: 're-run pending dead letters through their pipeline',
  help: `Usage: storage-consumer dlq redrive [--pipeline P] [--reason R] [--since T] [--json]

Re-runs the selected dead letters that were not re-driven yet through the same pipeline code as
Kafka's records (decode, resolve the app, upsert), one transaction per batch of the pipeline's
batch size. The ones that now succeed are stored and marked re-driven in that transaction; the
ones that fail again stay, with their reason and detail updated. Typical use: an app was
registered after its messages arrived (reason unknown_application). Running it again changes
nothing. A payload that was truncated when it was stored cannot be re-driven: it is listed and
left alone. Exit 0 when the re-drive ran (whatever failed again is reported), 1 on an error.

${FILTER_HELP}
  --json          the report as JSON
`,
  async run(args: readonly string[], io: CliIo): Promise<number> {
    const parsed = parseCommandArgs(dlqRedrive, args, io, { ...FILTER_OPTIONS, ...JSON_OPTION });
    if (!parsed) return EXIT.ok;
    const filter = parseFilter(parsed.values);
    const results = await withDatabase(io, ({ pool, settings, logger }) => redriveDeadLetters(pool, settings, filter, logger));
    if (parsed.values.json === true) {
      io.stdout(renderJson({ pipelines: results }));
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
    }
    return EXIT.ok;
  },
};
