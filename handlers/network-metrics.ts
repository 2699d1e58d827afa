import { createPipelineHandler } from '../shared/lambda-handler.js';

/** Lambda entry for the `network-metrics` topic (MSK or self-managed Kafka event source mapping). */
export const handler = createPipelineHandler('network-metrics');
