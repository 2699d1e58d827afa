/**
 * `storage-consumer pause` and `resume`: a pipeline's row in `pipeline_pauses` and its audit entry,
 * written in one transaction (shared/pause-store.ts); every host obeys the row (docs/operations.md,
 * "Pause and resume on the host").
 */
import { resolveActor } from '../../shared/operator-actions.js';
import { changePipelinePause, pauseChangeJson } from '../../shared/pause-store.js';
import type { PauseChange, PauseChangeResult } from '../../shared/pause-store.js';
import { PIPELINE_NAMES } from '../../shared/pipelines.js';
import type { CliIo, ParsedArgs } from '../command.js';
import { defineCommand, EXIT, jsonOption, UsageError } from '../command.js';
import { withDatabase } from '../context.js';
import { renderJson } from '../output.js';
import { auditPolicy, auditRefusal, NO_AUDIT_OPTION, reportUnrecorded } from './no-audit-option.js';
import { parsePipeline } from './pipeline-option.js';

/** The pause or resume as JSON: the one shape (shared/pause-store.ts), and the audit entry's id. */
function resultJson(result: PauseChangeResult) {
  const { audit } = result;
  return {
    ...pauseChangeJson(result),
    auditId: audit.id ?? null,
    ...(audit.unrecorded === undefined ? {} : { auditUnrecorded: audit.unrecorded }),
  };
}

/** What every host does with the change, said once for both commands. */
const EFFECT = 'every host running it reads pipeline_pauses at least every 5 s (STORAGE_PAUSE_POLL_INTERVAL_MS)';

/** The options of both commands; `why` is what `--reason` is for. */
function options(why: string) {
  return { reason: { type: 'string', value: 'TEXT', help: why }, ...jsonOption('the result as JSON'), ...NO_AUDIT_OPTION } as const;
}
type ChangeOptions = ReturnType<typeof options>;

/** The pipeline named on the command line. */
const PIPELINE_ARGUMENT = [{ name: 'pipeline', help: PIPELINE_NAMES.join(', ') }];

async function change({ values, positionals }: ParsedArgs<ChangeOptions>, io: CliIo, paused: boolean): Promise<number> {
  const command = paused ? 'pause' : 'resume';
  const pipeline = parsePipeline(positionals[0] as string, 'the pipeline');
  if (pipeline === undefined) throw new UsageError('missing argument');
  const change: PauseChange = {
    pipeline,
    paused,
    by: resolveActor(io.env),
    reason: values.reason,
    via: 'cli',
    audit: auditPolicy(values),
  };
  const result = await withDatabase(io, ({ pool, settings }) => changePipelinePause(pool, settings.database, change)).catch((error) => {
    throw auditRefusal(error, command);
  });
  if (result.audit.unrecorded !== undefined) reportUnrecorded(io, command, result.audit.unrecorded);
  if (values.json === true) {
    io.stdout(renderJson(resultJson(result)));
    return EXIT.ok;
  }
  const { pause, previous } = result;
  const already = (previous?.paused ?? false) === paused ? ` (it was already ${paused ? 'paused' : 'running'})` : '';
  const why = pause.reason ? `: ${pause.reason}` : '';
  io.stdout(
    paused
      ? `${pipeline} paused by ${pause.by} at ${pause.at.toISOString()}${why}${already}.\n` +
          `Each host finishes and commits its batch in flight, then fetches nothing and stays in the group; ${EFFECT}.\n` +
          `The Lambda functions do not read this: on AWS disable the event source mapping (docs/operations.md).\n`
      : `${pipeline} resumed by ${pause.by} at ${pause.at.toISOString()}${why}${already}.\nEach host fetches again from the committed ` +
          `offsets; ${EFFECT}.\n`,
  );
  return EXIT.ok;
}

/** `pause <pipeline> [--reason TEXT]`: pauses a pipeline on every host (the table, directly). */
export const pause = defineCommand({
  name: 'pause',
  summary: 'pause a pipeline on every host (works with no host reachable)',
  description: `Pauses <pipeline> (${PIPELINE_NAMES.join(', ')}) on every host: writes pipeline_pauses
and an audit entry (operator_actions) in one transaction. No host needs to be reachable: each
host reads the table at least every 5 s, finishes and commits its batch in flight, then fetches
nothing while it stays in the consumer group (no rebalance). The pause holds across host
restarts until 'storage-consumer resume <pipeline>'. Its lag grows meanwhile.

The Lambda functions do not read the table: on AWS, disable the pipeline's event source mapping
(docs/operations.md, "Pause, resume and status").

Refused (exit 1, nothing changed) when the audit entry cannot be written, unless --no-audit.`,
  arguments: PIPELINE_ARGUMENT,
  options: options("why (shown by 'status' and kept in the audit trail)"),
  run: (args, io) => change(args, io, true),
});

/** `resume <pipeline>`: resumes a paused pipeline on every host. */
export const resume = defineCommand({
  name: 'resume',
  summary: 'resume a paused pipeline on every host',
  description: `Resumes <pipeline> on every host: writes pipeline_pauses and an audit entry in one transaction.
Each host reads the table at least every 5 s and fetches again from the committed offsets.

Refused (exit 1, nothing changed) when the audit entry cannot be written, unless --no-audit.`,
  arguments: PIPELINE_ARGUMENT,
  options: options('why (kept in the audit trail)'),
  run: (args, io) => change(args, io, false),
});
