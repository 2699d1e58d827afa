import { createLambdaPipelineHandler } from '../aws/deployed-handler.js';

/** Lambda entry for the `network-metrics` topic (MSK or self-managed Kafka event source mapping). */
export const handler = createLambdaPipelineHandler('network-metrics');
