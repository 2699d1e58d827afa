/**
 * `--pipeline P` of the commands that look at one pipeline or all of them (`lag`, `status`, the
 * dead-letter filters), and the check of a pipeline named on the command line.
 */
import { isPipelineName, PIPELINE_NAMES } from '../../shared/pipelines.js';
import type { PipelineName } from '../../shared/pipelines.js';
import type { ConsumerSettings } from '../../config/pipeline-settings.js';
import { UsageError } from '../command.js';

/** `--pipeline P` of the commands that look at one pipeline or all of them (`lag`, `status`). */
export const PIPELINE_OPTION = {
  pipeline: { type: 'string', value: 'P', help: `only that pipeline (${PIPELINE_NAMES.join(', ')})` },
} as const;

/** Checks a pipeline named on the command line; `undefined` stays `undefined`. */
export function parsePipeline(named: string | undefined, what = '--pipeline'): PipelineName | undefined {
  if (named === undefined || isPipelineName(named)) return named;
  throw new UsageError(`${what} must be one of ${PIPELINE_NAMES.join(', ')}, got ${JSON.stringify(named)}`);
}

/**
 * The pipelines a command looks at: the one named, else the ones STORAGE_PIPELINES selects
 * (all of them by default).
 */
export function pipelinesFor(settings: ConsumerSettings, named: PipelineName | undefined): readonly PipelineName[] {
  return named === undefined ? settings.selectedPipelines : [named];
}
