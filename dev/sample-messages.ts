import { PIPELINES } from '../shared/pipelines.js';

/**
 * The docs/design.md appendix messages, one per topic, as fresh plain objects (mutate freely):
 * each pipeline's `sample` (shared/pipelines.ts). One source for the sample events
 * (`scripts/generate-events.ts`), `npm run produce:sample` and the tests.
 */

/** The `app-stats` message of the docs/design.md appendix. */
export const sampleAppStats = (): Record<string, unknown> => PIPELINES['app-stats'].sample();

/** The `reviews` message of the docs/design.md appendix. */
export const sampleReview = (): Record<string, unknown> => PIPELINES.reviews.sample();

/** The `network-metrics` message of the docs/design.md appendix. */
export const sampleNetworkMetrics = (): Record<string, unknown> => PIPELINES['network-metrics'].sample();
