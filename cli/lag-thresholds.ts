import type { PipelineName } from '../shared/pipeline-names.js';

/** The deployment stages of `serverless.yml`. */
export const STAGES = ['dev', 'staging', 'prod', 'local'] as const;
export type Stage = (typeof STAGES)[number];

/** Lag thresholds per pipeline: above it a group's total lag is too much. */
export type LagThresholds = Readonly<Record<PipelineName, number>>;

/**
 * The thresholds of the `<pipeline>-offset-lag` alarms, per stage, as the deployment sets them
 * (`offsetLagThreshold<Pipeline>` in deploy/params.yml); `test/integration/deploy-package.test.ts`
 * fails when the packaged alarms and this table disagree. `verify` checks lag against the same
 * numbers, so a reviews flood the alarm accepts (200,000 reviews in 5-15 minutes) is not a
 * failed verify either.
 */
export const LAG_ALARM_THRESHOLDS: Readonly<Record<Stage, LagThresholds>> = {
  // dev shares a smaller cluster with other teams: floods drain more slowly there.
  dev: { 'app-stats': 20_000, reviews: 400_000, 'network-metrics': 100 },
  staging: { 'app-stats': 5_000, reviews: 150_000, 'network-metrics': 20 },
  prod: { 'app-stats': 5_000, reviews: 150_000, 'network-metrics': 20 },
  local: { 'app-stats': 5_000, reviews: 150_000, 'network-metrics': 20 },
};

/** The stage whose thresholds `verify` uses when none is named: production's. */
export const DEFAULT_VERIFY_STAGE: Stage = 'prod';

/**
 * The consumer group ids per stage, as the deployment sets them (`group<Id>` in
 * deploy/params.yml, else docs/design.md section 1's); `test/integration/deploy-package.test.ts`
 * fails when the packaged event source mappings and this table disagree. `--stage` on `verify`,
 * `lag` and `replay` looks at these groups.
 */
export const STAGE_GROUPS: Readonly<Record<Stage, Readonly<Record<PipelineName, string>>>> = {
  dev: { 'app-stats': 'storage-consumer-dev.app-stats', reviews: 'storage-consumer-dev.reviews', 'network-metrics': 'storage-consumer-dev.network-metrics' },
  staging: {
    'app-stats': 'storage-consumer-staging.app-stats',
    reviews: 'storage-consumer-staging.reviews',
    'network-metrics': 'storage-consumer-staging.network-metrics',
  },
  prod: { 'app-stats': 'storage-consumer.app-stats', reviews: 'storage-consumer.reviews', 'network-metrics': 'storage-consumer.network-metrics' },
  local: { 'app-stats': 'storage-consumer.app-stats', reviews: 'storage-consumer.reviews', 'network-metrics': 'storage-consumer.network-metrics' },
};
