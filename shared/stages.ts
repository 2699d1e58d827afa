/**
 * The deployment stages and what differs per stage: values chosen per stage (`StageValues`) and the
 * consumer group ids a stage uses.
 */

/** The deployment stages of `serverless.yml` (deploy/params.yml holds their AWS settings). */
export const STAGES = ['dev', 'staging', 'prod', 'local'] as const;
export type Stage = (typeof STAGES)[number];

/** Type guard for a stage named from outside (a CLI option, `--stage` of osls). */
export function isStage(value: string): value is Stage {
  return (STAGES as readonly string[]).includes(value);
}

/** A value that may differ per stage: `default` holds for every stage that sets none of its own. */
export type StageValues<T> = { readonly default: T } & { readonly [S in Stage]?: T };

/** The value of `values` for `stage`. */
export function valueForStage<T>(values: StageValues<T>, stage: Stage): T {
  return values[stage] ?? values.default;
}

/**
 * The prefix of the consumer group ids per stage. dev and staging share a broker with other
 * teams' consumers, so their groups carry the stage; prod and local keep docs/design.md section 1's
 * ids (the old consumer's committed offsets carry over), which is a pipeline's `group`.
 */
const GROUP_PREFIXES: Readonly<Record<Stage, string | null>> = {
  dev: 'storage-consumer-dev',
  staging: 'storage-consumer-staging',
  prod: null,
  local: null,
};

/** The consumer group id a pipeline uses on a stage: `storage-consumer-dev.reviews` on dev. */
export function stageGroup(pipeline: { readonly name: string; readonly group: string }, stage: Stage): string {
  const prefix = GROUP_PREFIXES[stage];
  return prefix === null ? pipeline.group : `${prefix}.${pipeline.name}`;
}
