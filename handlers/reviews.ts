/**
 * The Lambda entry of the `reviews` pipeline (`handlers/reviews.handler`, the function
 * deploy/resources.js declares for it): it only names its pipeline; the handler itself is
 * aws/deployed-handler.ts's.
 */
import { createLambdaPipelineHandler } from '../aws/deployed-handler.js';

/** Lambda entry for the `reviews` topic (MSK or self-managed Kafka event source mapping). */
export const handler = createLambdaPipelineHandler('reviews');
