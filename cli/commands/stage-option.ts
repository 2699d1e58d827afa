/**
 * `--stage S`: a stage's consumer group names (shared/stages.ts) put into a command's environment
 * wherever no `STORAGE_GROUP_<PIPELINE>` is set. `replay` takes the option from here; `verify`
 * declares its own `--stage` and applies it the same way.
 */
import { envSuffix } from '../../shared/pipeline-spec.js';
import { PIPELINE_NAMES } from '../../shared/pipelines.js';
import type { CliIo } from '../command.js';
import { UsageError } from '../command.js';
import { stageGroups } from '../lag-thresholds.js';
import type { Stage } from '../../shared/stages.js';
import { isStage, STAGES } from '../../shared/stages.js';

/** `--stage S`: look at the consumer groups stage S deploys (shared/stages.ts). */
export const STAGE_OPTION = {
  stage: {
    type: 'string',
    value: 'S',
    help:
      `the consumer group names of stage S (${STAGES.join(', ')}), as its deployment sets them ` +
      '(a STORAGE_GROUP_<PIPELINE> variable that is set wins)',
  },
} as const;

/** Checks a stage named on the command line. */
function parseStage(stage: string): Stage {
  if (!isStage(stage)) throw new UsageError(`--stage must be one of ${STAGES.join(', ')}, got ${JSON.stringify(stage)}`);
  return stage;
}

/**
 * The command's environment with the stage's group ids (`STORAGE_GROUP_<PIPELINE>`) where the
 * variable is unset (an explicit variable wins, as it does for the host); unchanged without a
 * stage. The output names every group it looked at.
 */
export function applyStage(io: CliIo, stage: string | undefined): CliIo {
  if (stage === undefined) return io;
  const groups = stageGroups(parseStage(stage));
  const env: Record<string, string | undefined> = { ...io.env };
  for (const pipeline of PIPELINE_NAMES) {
    const variable = `STORAGE_GROUP_${envSuffix(pipeline)}`;
    if (!env[variable]?.trim()) env[variable] = groups[pipeline];
  }
  return { ...io, env };
}
