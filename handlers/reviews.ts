import { createLambdaPipelineHandler } from '../aws/lambda-pipeline.js';

/** Lambda entry for the `reviews` topic (MSK or self-managed Kafka event source mapping). */
export const handler = createLambdaPipelineHandler('reviews');
