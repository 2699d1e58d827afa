import type { PipelineName } from '../shared/pipelines.js';
import { PIPELINE_NAMES, PIPELINES } from '../shared/pipelines.js';
import type { Stage } from '../shared/stages.js';
import { stageGroup, valueForStage } from '../shared/stages.js';

/** Lag thresholds per pipeline: above it a group's total lag is too much. */
export type LagThresholds = Readonly<Record<PipelineName, number>>;

/**
 * The thresholds of a stage's `<pipeline>-offset-lag` alarms (each pipeline's
 * `lagAlarmThreshold`, shared/pipelines.ts). `verify` checks lag against the same numbers, so a
 * reviews flood the alarm accepts (200,000 reviews in 5-15 minutes) is not a failed verify either.
 */
export function lagAlarmThresholds(stage: Stage): LagThresholds {
  return perPipeline((name) => valueForStage(PIPELINES[name].lagAlarmThreshold, stage));
}

/** The stage whose thresholds `verify` uses when none is named: production's. */
export const DEFAULT_VERIFY_STAGE: Stage = 'prod';

/** The consumer group ids of a stage, as its event source mappings join them (shared/stages.ts). */
export function stageGroups(stage: Stage): Readonly<Record<PipelineName, string>> {
  return perPipeline((name) => stageGroup(PIPELINES[name], stage));
}

function perPipeline<T>(value: (name: PipelineName) => T): Readonly<Record<PipelineName, T>> {
  return Object.fromEntries(PIPELINE_NAMES.map((name) => [name, value(name)])) as Record<PipelineName, T>;
}
