/** The three pipelines, one per topic (docs/design.md section 1). */
export const PIPELINE_NAMES = ['app-stats', 'reviews', 'network-metrics'] as const;

/** A pipeline's name: also its default topic. */
export type PipelineName = (typeof PIPELINE_NAMES)[number];

/** Per-pipeline defaults from docs/design.md section 1. */
export const PIPELINE_DEFAULTS = {
  'app-stats': { topic: 'app-stats', group: 'storage-consumer.app-stats', batchSize: 200 },
  reviews: { topic: 'reviews', group: 'storage-consumer.reviews', batchSize: 500 },
  'network-metrics': { topic: 'network-metrics', group: 'storage-consumer.network-metrics', batchSize: 50 },
} as const satisfies Record<PipelineName, { topic: string; group: string; batchSize: number }>;

/** `network-metrics` -> `NETWORK_METRICS`, the form pipelines take in variable names. */
export function envSuffix(pipeline: PipelineName): string {
  return pipeline.toUpperCase().replaceAll('-', '_');
}

/** Type guard for a pipeline name read from outside (a variable, a CLI argument). */
export function isPipelineName(value: string): value is PipelineName {
  return (PIPELINE_NAMES as readonly string[]).includes(value);
}
