import { resolveActor } from '../../shared/operator-actions.js';
import { changePipelinePause, pauseChangeJson } from '../../shared/pause-store.js';
import type { CliIo, Command } from '../command.js';
import { EXIT, JSON_OPTION, parseCommandArgs, UsageError } from '../command.js';
import { withDatabase } from '../context.js';
import { renderJson } from '../output.js';
import { parsePipeline } from './pipeline-option.js';

/** What every host does with the change, said once for both commands. */
const EFFECT = 'every host running it reads pipeline_pauses at least every 5 s (STORAGE_PAUSE_POLL_INTERVAL_MS)';

async function change(command: Command, args: readonly string[], io: CliIo, paused: boolean): Promise<number> {
  const parsed = parseCommandArgs(command, args, io, { ...JSON_OPTION, reason: { type: 'string' } }, { min: 1, max: 1 });
  if (!parsed) return EXIT.ok;
  const pipeline = parsePipeline(parsed.positionals[0] as string, 'the pipeline');
  if (pipeline === undefined) throw new UsageError('missing argument');
  const result = await withDatabase(io, ({ pool, settings }) =>
    changePipelinePause(pool, settings.database, { pipeline, paused, by: resolveActor(io.env), reason: parsed.values.reason, via: 'cli' }),
  );
  if (parsed.values.json === true) {
    io.stdout(renderJson(pauseChangeJson(result)));
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
export const pause: Command = {
  name: 'pause',
  summary: 'pause a pipeline on every host (works with no host reachable)',
  help: `Usage: storage-consumer pause <pipeline> [--reason TEXT] [--json]

Pauses <pipeline> (app-stats, reviews or network-metrics) on every host: writes pipeline_pauses
and an audit entry (operator_actions) in one transaction. No host needs to be reachable: each
host reads the table at least every 5 s, finishes and commits its batch in flight, then fetches
nothing while it stays in the consumer group (no rebalance). The pause holds across host
restarts until 'storage-consumer resume <pipeline>'. Its lag grows meanwhile.

The Lambda functions do not read the table: on AWS, disable the pipeline's event source mapping
(docs/operations.md, "Pause, resume and status").

  --reason TEXT  why (shown by 'status' and kept in the audit trail)
  --json         the result as JSON
`,
  run: (args, io) => change(pause, args, io, true),
};

/** `resume <pipeline>`: resumes a paused pipeline on every host. */
export const resume: Command = {
  name: 'resume',
  summary: 'resume a paused pipeline on every host',
  help: `Usage: storage-consumer resume <pipeline> [--reason TEXT] [--json]

Resumes <pipeline> on every host: writes pipeline_pauses and an audit entry in one transaction.
Each host reads the table at least every 5 s and fetches again from the committed offsets.

  --reason TEXT  why (kept in the audit trail)
  --json         the result as JSON
`,
  run: (args, io) => change(resume, args, io, false),
};
